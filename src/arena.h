/* A bump allocator for data that lives exactly as long as its owner
 * (a parsed file's metadata, a writer's copied values). */
#ifndef BG_ARENA_H
#define BG_ARENA_H

#include <stddef.h>

typedef struct bg_arena_block bg_arena_block;

typedef struct bg_arena {
    bg_arena_block *head;
} bg_arena;

/* 16-byte aligned, zeroed memory; NULL when out of memory. */
void *bg_arena_alloc(bg_arena *arena, size_t size);
/* Copies len bytes and appends a NUL. */
char *bg_arena_strndup(bg_arena *arena, const char *src, size_t len);
void bg_arena_free(bg_arena *arena);

#endif
