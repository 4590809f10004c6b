#include "arena.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { ARENA_BLOCK_MIN = 1 << 20, ARENA_ALIGN = 16 };

struct bg_arena_block {
    bg_arena_block *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *bg_arena_alloc(bg_arena *arena, size_t size)
{
    if (size > SIZE_MAX - ARENA_ALIGN - sizeof(bg_arena_block))
        return NULL;
    size_t need = (size + ARENA_ALIGN - 1) & ~(size_t)(ARENA_ALIGN - 1);
    bg_arena_block *b = arena->head;
    if (!b || b->cap - b->used < need) {
        size_t cap = need > ARENA_BLOCK_MIN ? need : ARENA_BLOCK_MIN;
        b = malloc(sizeof *b + cap);
        if (!b)
            return NULL;
        b->used = 0;
        b->cap = cap;
        b->next = arena->head;
        arena->head = b;
    }
    void *p = b->data + b->used;
    b->used += need;
    memset(p, 0, size);
    return p;
}

char *bg_arena_strndup(bg_arena *arena, const char *src, size_t len)
{
    if (len == SIZE_MAX)
        return NULL;
    char *s = bg_arena_alloc(arena, len + 1);
    if (s && len)
        memcpy(s, src, len);
    return s;
}

void bg_arena_free(bg_arena *arena)
{
    bg_arena_block *b = arena->head;
    while (b) {
        bg_arena_block *next = b->next;
        free(b);
        b = next;
    }
    arena->head = NULL;
}
