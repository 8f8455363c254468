/*
 * What the two files of the compiled parser share, beyond eventparse_core.h's interface:
 * the column buffers (inline: every value goes through them) and the JSON scanner's entry
 * points, which eventparse_json.c defines and eventparse_core.c calls. Not a public
 * header: eventparse.c (the Python module) and the fuzz harness use eventparse_core.h.
 */
#ifndef CCLQ_EVENTPARSE_INTERNAL_H
#define CCLQ_EVENTPARSE_INTERNAL_H

/* Included first by both files: before any system header, glibc's extensions; in
 * sanitizer builds, the asserts on whatever NDEBUG says. */
#if defined(__linux__) && !defined(_GNU_SOURCE)
#define _GNU_SOURCE /* strtod_l, newlocale: glibc declares them under it */
#endif
#if defined(__SANITIZE_ADDRESS__)
#undef NDEBUG
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(undefined_behavior_sanitizer)
#undef NDEBUG
#endif
#endif
#include <assert.h>
#include <stdio.h>

#include "eventparse_core.h"

/* shared between the two files, never exported from the module */
#if defined(__GNUC__) || defined(__clang__)
#define EP_HIDDEN __attribute__((visibility("hidden")))
#else
#define EP_HIDDEN
#endif

/* ------------------------------------------------------------------ buffers and columns */
/* memcpy for the short copies that dominate here (keys, numbers, names): fixed-size
 * moves the compiler inlines, instead of a library call each */
static inline void copy_small(char *dst, const char *src, size_t n) {
    if (n >= 16) {
        memcpy(dst, src, n);
    } else if (n >= 8) {
        uint64_t a, b;
        memcpy(&a, src, 8);
        memcpy(&b, src + n - 8, 8);
        memcpy(dst, &a, 8);
        memcpy(dst + n - 8, &b, 8);
    } else if (n >= 4) {
        uint32_t a, b;
        memcpy(&a, src, 4);
        memcpy(&b, src + n - 4, 4);
        memcpy(dst, &a, 4);
        memcpy(dst + n - 4, &b, 4);
    } else {
        for (size_t i = 0; i < n; i++) dst[i] = src[i];
    }
}

static inline int buf_reserve(Buf *b, size_t extra) {
    if (extra > SIZE_MAX / 4 - b->len) return -1;
    size_t need = b->len + extra;
    if (need <= b->cap && b->data) return 0; /* after a reserve, data is never NULL */
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *p = (char *)realloc(b->data, cap);
    if (!p) return -1;
    b->data = p;
    b->cap = cap;
    return 0;
}

static inline int buf_append(Buf *b, const void *src, size_t n) {
    if (n == 0) return 0; /* b->data may still be NULL: no pointer arithmetic on it */
    if (buf_reserve(b, n)) return -1;
    copy_small(b->data + b->len, (const char *)src, n);
    b->len += n;
    return 0;
}

/* n zero bytes at the end */
static inline int buf_zeros(Buf *b, size_t n) {
    if (n == 0) return 0;
    if (buf_reserve(b, n)) return -1;
    memset(b->data + b->len, 0, n);
    b->len += n;
    return 0;
}

static inline void buf_free(Buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

static inline int col_init(Col *c, int type) {
    memset(c, 0, sizeof *c);
    c->type = type;
    if (type == COL_STR || type == COL_LIST) {
        int32_t zero = 0;
        return buf_append(&c->values, &zero, 4);
    }
    return 0;
}

static inline void col_free(Col *c) {
    buf_free(&c->values);
    buf_free(&c->data);
    buf_free(&c->valid);
}

/* NULLs up to (not including) row */
static inline int col_pad(Col *c, size_t row) {
    if (row <= c->rows) return 0;
    size_t missing = row - c->rows;
    size_t bytes = (row + 7) / 8;
    if (c->valid.len < bytes && buf_zeros(&c->valid, bytes - c->valid.len)) return -1;
    if (c->type == COL_I64 || c->type == COL_F64) {
        if (buf_zeros(&c->values, missing * 8)) return -1;
    } else {
        int32_t off;
        memcpy(&off, c->values.data + c->values.len - 4, 4);
        if (buf_reserve(&c->values, missing * 4)) return -1;
        for (size_t i = 0; i < missing; i++) {
            memcpy(c->values.data + c->values.len, &off, 4);
            c->values.len += 4;
        }
    }
    c->nulls += missing;
    c->rows = row;
    return 0;
}

/* marks `row` valid (the value itself was written by the caller) */
static inline int col_mark(Col *c, size_t row) {
    size_t bytes = row / 8 + 1;
    if (c->valid.len < bytes && buf_zeros(&c->valid, bytes - c->valid.len)) return -1;
    ((unsigned char *)c->valid.data)[row / 8] |= (unsigned char)(1u << (row % 8));
    c->rows = row + 1;
    c->touched = 1;
    return 0;
}

static inline int col_i64(Col *c, size_t row, int64_t v) {
    if (col_pad(c, row) || buf_append(&c->values, &v, 8)) return -1;
    return col_mark(c, row);
}

static inline int col_f64(Col *c, size_t row, double v) {
    if (col_pad(c, row) || buf_append(&c->values, &v, 8)) return -1;
    return col_mark(c, row);
}

/* ends a string (or list) row whose bytes (or child values) were appended to c->data */
static inline int col_close_var(Col *c, size_t row) {
    size_t end = c->type == COL_LIST ? c->data.len / 8 : c->data.len;
    if (end > INT32_MAX) return -1;
    int32_t off = (int32_t)end;
    if (buf_append(&c->values, &off, 4)) return -1;
    return col_mark(c, row);
}

static inline int col_str(Col *c, size_t row, const char *s, size_t n) {
    if (col_pad(c, row) || buf_append(&c->data, s, n)) return -1;
    return col_close_var(c, row);
}

/* ------------------------------------------------------------------ the scanner (eventparse_json.c) */
static inline void skip_ws(Parser *P) {
    const char *p = P->p, *e = P->end;
    while (p < e && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    P->p = p;
}

static inline int peek(Parser *P) { return P->p < P->end ? (unsigned char)*P->p : -1; }

enum { TIME_OK = 0, TIME_BAD = 1, TIME_DECLINE = 2 };

/* The parser's state after an error: declined (the msgspec path reads the chunk), a cut
 * inside an event (a boundary to move), out of memory; the first said wins. */
EP_HIDDEN void ep_decline(Parser *P, const char *why);
EP_HIDDEN void ep_syntax(Parser *P);
EP_HIDDEN void ep_nomem(Parser *P);

/* Strings, numbers and values: each parse_* reads one token at P->p (P->status says
 * whether it could); the conversions take a token already validated. */
EP_HIDDEN int ep_decode_string(const Span *s, Buf *out);
EP_HIDDEN int ep_int_token(const char *p, size_t n, int64_t *out);
EP_HIDDEN double ep_to_double(Parser *P, const char *p, size_t n);
EP_HIDDEN int ep_time_ns(const char *p, size_t n, int64_t *out);
EP_HIDDEN int ep_after_item(Parser *P, char close);
EP_HIDDEN int ep_note_key(Parser *P, const Span *k, size_t first);
EP_HIDDEN int ep_parse_member_key(Parser *P, Span *k);
EP_HIDDEN void ep_parse_value(Parser *P, Span *out, int level);

/* Value text as the reference reader writes it into ``args`` (0; -1 out of memory; 1 a
 * number for Python to spell). */
EP_HIDDEN int ep_append_token(Buf *out, const Span *v);
EP_HIDDEN int ep_compact_append(Buf *out, const char *src, size_t n);

#endif
