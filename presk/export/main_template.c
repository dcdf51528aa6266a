/* main.c, written by presk export: runs the model once, or prints tokens as text.

     ./model [--weights CKPT.psk.d] model.bin inputs.bin outputs.bin
     ./model --text tokens.bin

   model.bin holds the parameters the export was given and the schedule's constants;
   --weights replaces the parameters by a checkpoint's, each converted to its realized
   type (checkpoint.c). inputs.bin holds the inputs one after another, each in its C type
   (model.h lists them); outputs.bin gets the outputs so. Exit status 0; 1 with a message
   on a bad file or checkpoint; 2 when an index is out of range (model_run says which
   check failed). --text writes the bytes each token of tokens.bin (int64 each, as
   inputs.bin holds tokens) stands for to stdout (model_token; exit status 1 at a token
   the vocabulary lacks). */
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char *read_file(const char *path, size_t want) {
  FILE *f = fopen(path, "rb");
  unsigned char *buf = malloc(want + 1);
  size_t got = 0;
  if (f != NULL && buf != NULL) got = fread(buf, 1, want + 1, f);
  if (f != NULL) fclose(f);
  if (f == NULL || buf == NULL || got != want) {
    fprintf(stderr, "model: %s is not %lu bytes of inputs\n", path, (unsigned long)want);
    free(buf);
    return NULL;
  }
  return buf;
}

static int print_text(const char *path) {
  FILE *f = fopen(path, "rb");
  unsigned char word[8];
  const char *bytes;
  size_t got, length;
  int64_t token;
  int i;
  if (f == NULL) {
    fprintf(stderr, "model: cannot read %s\n", path);
    return 1;
  }
  while ((got = fread(word, 1, sizeof word, f)) == sizeof word) {
    for (token = 0, i = 7; i >= 0; i--) token = (int64_t)((uint64_t)token << 8 | word[i]);
    bytes = model_token(token, &length);
    if (bytes == NULL) {
      fprintf(stderr, "model: token %lld is not one of the %d of the vocabulary\n",
              (long long)token, MODEL_VOCAB);
      fclose(f);
      return 1;
    }
    fwrite(bytes, 1, length, stdout);
  }
  fclose(f);
  if (got != 0) {
    fprintf(stderr, "model: %s is not whole int64 tokens\n", path);
    return 1;
  }
  return fflush(stdout) == 0 ? 0 : 1;
}

int main(int argc, char **argv) {
  const void *inputs[MODEL_INPUTS + 1];
  void *outputs[MODEL_OUTPUTS + 1];
  size_t i, in_bytes = 0, out_bytes = 0;
  unsigned char *in, *out;
  const char *weights = NULL;
  char why[512];
  model *m;
  int status;
  FILE *f;
  if (argc == 3 && strcmp(argv[1], "--text") == 0) return print_text(argv[2]);
  if (argc == 6 && strcmp(argv[1], "--weights") == 0) {
    weights = argv[2];
    argv += 2;
    argc -= 2;
  }
  if (argc != 4) {
    fprintf(stderr, "usage: model [--weights CKPT.psk.d] model.bin inputs.bin outputs.bin\n"
                    "       model --text tokens.bin\n");
    return 1;
  }
  for (i = 0; i < MODEL_INPUTS; i++) in_bytes += model_input_bytes[i];
  for (i = 0; i < MODEL_OUTPUTS; i++) out_bytes += model_output_bytes[i];
  m = model_load(argv[1]);
  if (m == NULL) {
    fprintf(stderr, "model: cannot read %s as %lu bytes of parameters\n", argv[1],
            (unsigned long)MODEL_DATA_BYTES);
    return 1;
  }
  if (weights != NULL && model_read_checkpoint(m, weights, why, sizeof why) != 0) {
    fprintf(stderr, "model: %s: %s\n", weights, why);
    model_free(m);
    return 1;
  }
  in = read_file(argv[2], in_bytes);
  out = malloc(out_bytes + 1);
  if (in == NULL || out == NULL) return 1;
  for (i = 0, in_bytes = 0; i < MODEL_INPUTS; in_bytes += model_input_bytes[i++])
    inputs[i] = in + in_bytes;
  for (i = 0, out_bytes = 0; i < MODEL_OUTPUTS; out_bytes += model_output_bytes[i++])
    outputs[i] = out + out_bytes;
  status = model_run(m, inputs, outputs);
  if (status != 0) {
    fprintf(stderr, "model: index check %d failed: an index out of range\n", status);
    return 2;
  }
  f = fopen(argv[3], "wb");
  if (f == NULL || fwrite(out, 1, out_bytes, f) != out_bytes || fclose(f) != 0) {
    fprintf(stderr, "model: cannot write %s\n", argv[3]);
    return 1;
  }
  free(in);
  free(out);
  model_free(m);
  return 0;
}
