/*
 * libFuzzer harness for the compiled chunk parser (cclq/formats/chrome/eventparse_core.h, its .c and eventparse_json.c),
 * pure C: any bytes as a chunk, with bounds and a base time taken from the input's first
 * bytes. Built and run by tests/fuzz/run.sh with AddressSanitizer and UBSan; a crash, a
 * leak, an out-of-bounds read or undefined behaviour fails it.
 *
 * Besides not crashing, it checks what the parser promises of a chunk it accepts: every
 * column it returns holds exactly `rows` rows, every offset is within its data, and
 * `rows` never exceeds the entries.
 */
#define _GNU_SOURCE
#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../cclq/formats/chrome/eventparse_core.h"

static Config CFG;
static locale_t LOC;

static void add_key(const char *key, int column, int kind) {
    PromotedKey *k = &CFG.keys[CFG.n_keys++];
    strcpy(k->key, key);
    k->len = strlen(key);
    k->column = column;
    CFG.kinds[column] = kind;
}

static void setup(void) {
    /* a few keys of each kind, two spellings of one column (as schema.PROMOTED_ARGS has) */
    add_key("stream", 0, KIND_INT);
    add_key("External id", 1, KIND_INT);
    add_key("external id", 1, KIND_INT);
    add_key("flops", 2, KIND_FLOAT);
    add_key("dtype", 3, KIND_STR);
    add_key("grid", 4, KIND_INT_LIST);
    add_key("blocks per SM", 5, KIND_FLOAT);
    CFG.n_columns = 6;
    const char *legacy[][2] = {{"Kernel", "kernel"}, {"Operator", "cpu_op"}};
    for (int i = 0; i < 2; i++) {
        strcpy(CFG.legacy_old[i], legacy[i][0]);
        CFG.legacy_old_len[i] = strlen(legacy[i][0]);
        strcpy(CFG.legacy_new[i], legacy[i][1]);
        CFG.legacy_new_len[i] = strlen(legacy[i][1]);
    }
    CFG.n_legacy = 2;
    ep_config_index_keys(&CFG);
    LOC = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

static void check_column(const Col *c, size_t rows) {
    if (!c->touched && c->rows == 0) return; /* all NULL: not returned, not padded */
    assert(c->rows == rows);
    assert(c->valid.len >= (rows + 7) / 8 || (c->nulls == 0 && c->valid.len >= (rows + 7) / 8) || rows == 0 ||
           c->valid.len * 8 >= rows);
    if (c->type == COL_I64 || c->type == COL_F64) {
        assert(c->values.len == rows * 8);
    } else {
        assert(c->values.len == (rows + 1) * 4);
        const int32_t *off = (const int32_t *)c->values.data;
        size_t limit = c->type == COL_LIST ? c->data.len / 8 : c->data.len;
        for (size_t i = 0; i < rows; i++) assert(off[i] <= off[i + 1]);
        assert((size_t)off[rows] == limit);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int ready = 0;
    if (!ready) {
        setup();
        ready = 1;
    }
    if (size < 4) return 0;
    int levels = data[0] % 70;
    size_t max_string = 1 + data[1] * 4;
    size_t max_event = 1 + data[2] * 16;
    int64_t base = (int64_t)((uint64_t)data[3] << 56) ^ (int64_t)data[3];
    /* the chunk gets its own allocation of exactly its size: ASan sees any read past it */
    size_t n = size - 4;
    char *chunk = (char *)malloc(n ? n : 1);
    memcpy(chunk, data + 4, n);
    Parser *P = (Parser *)malloc(sizeof(Parser));
    ep_parser_init(P, &CFG, chunk, n);
    P->value_levels = levels;
    P->max_string = max_string;
    P->max_event = max_event;
    P->base = base;
    P->c_locale = LOC;
    ep_parse_chunk(P);
    if (P->status == EP_OK) {
        assert(P->rows <= P->entries);
        for (int i = 0; i < N_BASE; i++) check_column(&P->base_cols[i], P->rows);
        for (int i = 0; i < CFG.n_columns; i++) check_column(&P->promoted[i], P->rows);
    }
    ep_parser_free(P);
    free(P);
    free(chunk);
    return 0;
}
