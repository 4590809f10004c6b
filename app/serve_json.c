/* response_format json_object: generation constrained to one JSON object.
 * A byte-level JSON recognizer is run over each candidate token's text;
 * tokens that would make the output anything but the prefix of a JSON
 * object get -inf before sampling. Once the object is closed the answer
 * ends. Whitespace is allowed where JSON allows it. */
#include <math.h>
#include <string.h>

#include "serve.h"

enum {
    J_VALUE,       /* a value must come */
    J_VALUE_OR_END, /* after '[': a value or ']' */
    J_KEY_OR_END,  /* after '{': a key or '}' */
    J_KEY,         /* after ',' in an object */
    J_COLON,
    J_AFTER,       /* after a value: ',' or the container's end */
    J_STRING,
    J_ESCAPE,
    J_HEX,         /* in \uXXXX: aux = digits left */
    J_NUMBER,      /* aux: the number's part, see number_step */
    J_LITERAL,     /* aux: index into the literal lit */
    J_DONE,
};

static const char *const literals[] = {"true", "false", "null"};

static bool is_ws(unsigned char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

/* A value has ended: what comes next depends on the container. */
static void value_done(srv_json *j)
{
    j->state = j->depth ? J_AFTER : J_DONE;
}

static bool begin_value(srv_json *j, unsigned char c)
{
    if (j->depth == 0 && c != '{') /* json_object: the top level is an object */
        return false;
    switch (c) {
    case '{':
    case '[':
        if (j->depth == SRV_JSON_MAX_DEPTH)
            return false;
        j->stack[j->depth++] = (char)c;
        j->state = c == '{' ? J_KEY_OR_END : J_VALUE_OR_END;
        return true;
    case '"':
        j->state = J_STRING;
        j->in_key = false;
        return true;
    case 't':
    case 'f':
    case 'n':
        j->state = J_LITERAL;
        j->lit = c == 't' ? 0 : c == 'f' ? 1 : 2;
        j->aux = 1;
        return true;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) {
            j->state = J_NUMBER;
            j->aux = c == '-' ? 0 : c == '0' ? 2 : 1;
            return true;
        }
        return false;
    }
}

static bool close_container(srv_json *j, unsigned char c)
{
    if (!j->depth || j->stack[j->depth - 1] != (c == '}' ? '{' : '['))
        return false;
    j->depth--;
    value_done(j);
    return true;
}

/* Number parts: 0 after '-', 1 in integer digits, 2 after a leading 0,
 * 3 after '.', 4 in fraction digits, 5 after 'e', 6 after the exponent's
 * sign, 7 in exponent digits. Returns -1 for a byte that is not part of
 * the number (which then ends if it can), 0 for an invalid byte, 1 if
 * taken. */
static int number_step(srv_json *j, unsigned char c)
{
    bool digit = c >= '0' && c <= '9';
    switch (j->aux) {
    case 0:
        if (!digit)
            return 0;
        j->aux = c == '0' ? 2 : 1;
        return 1;
    case 1:
    case 2:
        if (digit && j->aux == 1)
            return 1;
        if (digit)
            return 0; /* no leading zeros */
        if (c == '.') {
            j->aux = 3;
            return 1;
        }
        if (c == 'e' || c == 'E') {
            j->aux = 5;
            return 1;
        }
        return -1;
    case 3:
        if (!digit)
            return 0;
        j->aux = 4;
        return 1;
    case 4:
        if (digit)
            return 1;
        if (c == 'e' || c == 'E') {
            j->aux = 5;
            return 1;
        }
        return -1;
    case 5:
        if (c == '+' || c == '-') {
            j->aux = 6;
            return 1;
        }
        /* fall through */
    case 6:
        if (!digit)
            return 0;
        j->aux = 7;
        return 1;
    default:
        return digit ? 1 : -1;
    }
}

bool srv_json_feed(srv_json *j, const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        switch (j->state) {
        case J_VALUE:
            if (!is_ws(c) && !begin_value(j, c))
                return false;
            break;
        case J_VALUE_OR_END:
            if (c == ']') {
                if (!close_container(j, c))
                    return false;
            } else if (!is_ws(c) && !begin_value(j, c)) {
                return false;
            }
            break;
        case J_KEY_OR_END:
        case J_KEY:
            if (c == '"') {
                j->state = J_STRING;
                j->in_key = true;
            } else if (c == '}' && j->state == J_KEY_OR_END) {
                if (!close_container(j, c))
                    return false;
            } else if (!is_ws(c)) {
                return false;
            }
            break;
        case J_COLON:
            if (c == ':')
                j->state = J_VALUE;
            else if (!is_ws(c))
                return false;
            break;
        case J_AFTER:
            if (c == ',')
                j->state = j->stack[j->depth - 1] == '{' ? J_KEY : J_VALUE;
            else if (c == '}' || c == ']') {
                if (!close_container(j, c))
                    return false;
            } else if (!is_ws(c))
                return false;
            break;
        case J_STRING:
            if (c == '"') {
                if (j->in_key)
                    j->state = J_COLON;
                else
                    value_done(j);
            } else if (c == '\\') {
                j->state = J_ESCAPE;
            } else if (c < 0x20) {
                return false;
            }
            break;
        case J_ESCAPE:
            if (c == 'u') {
                j->state = J_HEX;
                j->aux = 4;
            } else if (strchr("\"\\/bfnrt", c) && c) {
                j->state = J_STRING;
            } else {
                return false;
            }
            break;
        case J_HEX:
            if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
                return false;
            if (--j->aux == 0)
                j->state = J_STRING;
            break;
        case J_NUMBER: {
            int r = number_step(j, c);
            if (r == 0)
                return false;
            if (r < 0) {
                if (j->aux == 0 || j->aux == 3 || j->aux == 5 || j->aux == 6)
                    return false; /* the number is unfinished */
                value_done(j);
                i--; /* the byte is read again after the number */
            }
            break;
        }
        case J_LITERAL:
            if (c != (unsigned char)literals[j->lit][j->aux])
                return false;
            if (!literals[j->lit][++j->aux])
                value_done(j);
            break;
        case J_DONE:
            if (!is_ws(c))
                return false;
            break;
        }
    }
    return true;
}

bool srv_json_done(const srv_json *j) { return j->state == J_DONE; }

void srv_json_mask(const srv_json *j, const brigade_vocab *vocab, const float *logits,
                   float *out, int32_t n_vocab)
{
    for (int32_t id = 0; id < n_vocab; id++) {
        out[id] = -INFINITY;
        if (logits[id] == -INFINITY)
            continue;
        brigade_string piece = brigade_token_piece(vocab, id, false);
        if (!piece.len) /* control tokens and the like: not text */
            continue;
        srv_json probe = *j;
        if (srv_json_feed(&probe, piece.ptr, piece.len))
            out[id] = logits[id];
    }
}
