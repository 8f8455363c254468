/*
 * The compiled chunk parser of the fast Chrome-JSON reader: pure C, no Python. This
 * header is its interface (the types a caller fills and reads, four functions);
 * eventparse_core.c is the implementation.
 *
 * One call (ep_parse_chunk) parses one chunk of a trace's event array, `[` + whole
 * events + `]` (as chunks.py cuts it), and fills the columns of the events table
 * directly: no object per event. It implements the rules of events.py for the events
 * it can take with certainty, and *declines* the whole chunk for anything else (a B/E
 * pair, a string timestamp, a float pid, a promoted value that needs Python's Decimal
 * rules, a key given twice, a bound approached, a lone surrogate escape, invalid UTF-8,
 * a syntax error before the end): the caller then reads the chunk with the msgspec
 * path, which gives the same rows or the same error as it always has. Declining is
 * always safe; accepting is only done where the result is known to equal the
 * reference reader's.
 *
 * Every read is bounds-checked against the chunk's end (`P->end`); the parser never
 * reads past it, never writes outside a buffer it has grown, and reports a failed
 * allocation instead of crashing. tests/fuzz/ runs it under libFuzzer with ASan/UBSan;
 * CI runs the property and hostile-input tests against an ASan/UBSan build, in which
 * the implementation's asserts (its invariants) are on.
 *
 * Used by eventparse.c (the Python module) and by the fuzz harness.
 */
#ifndef CCLQ_EVENTPARSE_CORE_H
#define CCLQ_EVENTPARSE_CORE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <locale.h>
#if defined(__APPLE__)
#include <xlocale.h>
#endif

/* ------------------------------------------------------------------ outcomes */
enum {
    EP_OK = 0,
    EP_BOUNDARY = 1, /* the text ends inside a value: the cut was not an event boundary */
    EP_DECLINE = 2,  /* not for this parser: the caller reads the chunk another way */
    EP_NOMEM = 3,
};

/* drop reasons, in the order of DROP_REASONS in compiled.py */
enum { DROP_NO_TS = 0, DROP_BAD_TS, DROP_BAD_DUR, DROP_NEGATIVE_DUR, DROP_NOT_AN_OBJECT, DROP_EMPTY_OBJECT };

/* kinds of a promoted column, as compiled.py passes them */
enum { KIND_INT = 0, KIND_FLOAT = 1, KIND_STR = 2, KIND_INT_LIST = 3 };

/* the base columns this parser fills, in EVENT_SCHEMA order after file_id */
enum {
    C_IDX = 0, C_PH, C_CAT, C_CAT_RAW, C_NAME, C_PID, C_TID, C_TS, C_DUR, C_ID, C_BP, C_S, C_ARGS,
    N_BASE
};
#define MAX_PROMOTED 64
#define MAX_LEGACY 16
#define MAX_KEYS 128
#define MAX_NUMBER_CHARS 100 /* a longer number goes to the msgspec path (bounds, big ints) */
#define MAX_TIME_DIGITS 28   /* Decimal's context precision: more digits round differently */

/* ------------------------------------------------------------------ buffers */
typedef struct {
    char *data;
    size_t len, cap;
} Buf;






/* ------------------------------------------------------------------ columns */
enum { COL_STR = 0, COL_I64 = 1, COL_F64 = 2, COL_LIST = 3 };

/* One Arrow column being built. Rows are appended in order; rows skipped are NULL
 * (filled in lazily by col_pad, so that a column that is mostly NULL costs nothing per
 * row until a value arrives). */
typedef struct {
    int type;
    Buf values;  /* COL_I64/F64: 8 bytes a row; COL_STR/LIST: int32 offsets, rows + 1 */
    Buf data;    /* COL_STR: the bytes; COL_LIST: the int64 child values */
    Buf valid;   /* validity bitmap, one bit a row */
    size_t rows; /* rows filled (values and NULLs) */
    size_t nulls;
    int touched; /* a value was ever appended */
} Col;









/* ------------------------------------------------------------------ configuration */
typedef struct {
    char key[64];
    size_t len;
    int column; /* index into the promoted columns */
} PromotedKey;

#define KEY_SLOTS 256 /* open addressing over the promoted keys: a few probes a lookup */

typedef struct {
    int n_columns;
    int kinds[MAX_PROMOTED];
    int n_keys;
    PromotedKey keys[MAX_KEYS];
    int16_t key_slots[KEY_SLOTS]; /* index into keys + 1; 0: empty (config_index_keys) */
    int n_legacy;
    char legacy_old[MAX_LEGACY][32];
    size_t legacy_old_len[MAX_LEGACY];
    char legacy_new[MAX_LEGACY][32];
    size_t legacy_new_len[MAX_LEGACY];
} Config;

/* ------------------------------------------------------------------ values */
enum { T_ABSENT = 0, T_STRING, T_INT, T_FLOAT, T_TRUE, T_FALSE, T_NULL, T_ARRAY, T_OBJECT };

/* Where a value is in the chunk: a string's content between its quotes (`esc`: it holds
 * a backslash), a number's or a literal's text, a container's whole text. */
typedef struct {
    const char *p;
    size_t n;
    uint8_t type;
    uint8_t esc;
} Span;

/* int_list values of one event, parsed while the args are walked */
enum { LIST_OK = 0, LIST_NOT_INTS = 1, LIST_TOO_BIG = 2 };

typedef struct {
    Span v;
    size_t list_off, list_len; /* into Parser.list_scratch */
    int list_status;
} Slot;

/* ------------------------------------------------------------------ the parser */
typedef struct {
    const char *end, *p;
    int status;      /* EP_OK until something fails */
    const char *why; /* the reason, for a decline */
    int value_levels;
    size_t max_string, max_event;
    int64_t base;
    const Config *cfg;
    locale_t c_locale;

    /* output */
    Col base_cols[N_BASE];
    Col promoted[MAX_PROMOTED];
    size_t rows;    /* rows kept */
    size_t entries; /* entries of the array, dropped ones included */
    int64_t last_empty;
    Buf drops;      /* per drop: int32 reason, int32 ph length, ph bytes */
    int64_t out_of_range[MAX_PROMOTED];

    /* per event */
    Slot slots[MAX_PROMOTED];
    uint64_t slot_mask;
    int64_t pending_range[MAX_PROMOTED];
    uint64_t pending_mask;
    Buf list_scratch;
    Buf scratch; /* decoded strings */
    Buf keys_seen; /* uint64 hashes of the keys of the objects being read, innermost last */
} Parser;

/* ------------------------------------------------------------------ the interface */
/* Fills cfg->key_slots from cfg->keys: once, after the keys are set. */
void ep_config_index_keys(Config *cfg);
/* A parser over data[0:n] with the configuration `cfg` (which it reads, never writes);
 * the caller then sets the bounds (value_levels, max_string, max_event), base and
 * c_locale. P->status is EP_NOMEM if a first allocation failed. */
void ep_parser_init(Parser *P, const Config *cfg, const char *data, size_t n);
/* Parses the chunk: P->status says how it went (EP_OK: the columns hold P->rows rows). */
void ep_parse_chunk(Parser *P);
/* Frees what the parser allocated (not P itself). */
void ep_parser_free(Parser *P);

#endif
