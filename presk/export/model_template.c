/* The fixed part of an exported model.c (presk/export/model_template.c): the bit casts
   the kernels call, then (at the marker) the kernels and the host printed by
   mlir-translate --mlir-to-cpp, then the vocabulary's lookup (model_token), the loader
   of model.bin (and of a checkpoint's parameters, through checkpoint.c) and model_run. */
#include "model.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A float's bits and back, as arith.bitcast means them (memcpy: no aliasing question). */
static inline int32_t presk_f32_bits(float x) { int32_t b; memcpy(&b, &x, sizeof b); return b; }
static inline float presk_bits_f32(int32_t b) { float x; memcpy(&x, &b, sizeof x); return x; }
static inline int64_t presk_f64_bits(double x) { int64_t b; memcpy(&b, &x, sizeof b); return b; }
static inline double presk_bits_f64(int64_t b) { double x; memcpy(&x, &b, sizeof x); return x; }

/* @EMITTED@ */

struct model {
  uint8_t *data; /* model.bin: the parameters in their realized types, then the constants */
};

struct place {
  size_t region, offset;
};

const size_t model_input_bytes[MODEL_INPUTS + 1] = MODEL_INPUT_BYTES;
const size_t model_output_bytes[MODEL_OUTPUTS + 1] = MODEL_OUTPUT_BYTES;
static const struct place data_places[MODEL_DATA_ARRAYS + 1] = MODEL_DATA_PLACES;
static const struct place output_places[MODEL_OUTPUTS + 1] = MODEL_OUTPUT_PLACES;
static const char token_text[] = MODEL_TOKEN_TEXT;
static const size_t token_offsets[MODEL_VOCAB + 1] = MODEL_TOKEN_OFFSETS;

const char *model_token(int64_t t, size_t *length) {
  if (t < 0 || t >= MODEL_VOCAB) return NULL;
  *length = token_offsets[t + 1] - token_offsets[t];
  return token_text + token_offsets[t];
}

model *model_load(const char *path) {
  FILE *f = fopen(path, "rb");
  model *m = malloc(sizeof *m);
  size_t got = 0;
  if (f == NULL || m == NULL || (m->data = malloc(MODEL_DATA_BYTES + 1)) == NULL) {
    if (f != NULL) fclose(f);
    free(m);
    return NULL;
  }
  got = fread(m->data, 1, MODEL_DATA_BYTES + 1, f); /* one more: a longer file is refused */
  fclose(f);
  if (got != MODEL_DATA_BYTES) {
    model_free(m);
    errno = EINVAL;
    return NULL;
  }
  return m;
}

int presk_read_checkpoint(const char *dir, uint8_t *data, char *why, size_t size);

int model_read_checkpoint(model *m, const char *dir, char *why, size_t size) {
  return presk_read_checkpoint(dir, m->data, why, size);
}

void model_free(model *m) {
  if (m != NULL) free(m->data);
  free(m);
}

int model_run(const model *m, const void *const inputs[], void *const outputs[]) {
  uint8_t *regions[MODEL_REGIONS];
  uint8_t *arena = malloc(MODEL_ARENA_BYTES + 1);
  size_t i;
  int bad;
  if (arena == NULL) return -1;
  regions[0] = arena;
  for (i = 0; i < MODEL_DATA_ARRAYS; i++)
    regions[data_places[i].region] = m->data + data_places[i].offset;
  for (i = 0; i < MODEL_INPUTS; i++) regions[MODEL_FIRST_INPUT + i] = (uint8_t *)inputs[i];
  bad = presk_check(regions);
  if (bad == 0) {
    presk_launch(regions);
    for (i = 0; i < MODEL_OUTPUTS; i++)
      memcpy(outputs[i], regions[output_places[i].region] + output_places[i].offset,
             model_output_bytes[i]);
  }
  free(arena);
  return bad;
}
