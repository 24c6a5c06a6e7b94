/* What the config reader's neighbours share: comparing and listing effective configs,
 * sizes written as text, and fitting a config's model to the weather files it names. */
#ifndef BRISK_CONFIG_INTERNAL_H
#define BRISK_CONFIG_INTERNAL_H

#include "brisk/data.h"
#include "brisk/train.h"

/* config_diff.c: "path: A -> B" items (at most 8 shown, "; "-separated) for every value that
 * differs between two effective configs, within top-level section `only` (NULL: all) and
 * leaving out section `skip` (NULL: none). Returns how many differ. */
int brisk_config_diff(const char *a_json, const char *b_json, const char *only, const char *skip, char *out,
                      size_t cap);
/* config_values.c: every key of an effective config with the value a run uses (as written,
 * else the reader's default), as compact JSON: in the order the reader asks for them, then
 * the keys it never asks for. */
typedef void (*brisk_config_value_fn)(void *user, const char *key, const char *value);
brisk_status brisk_config_values(const char *json, const char *label, brisk_config_value_fn fn, void *user,
                                 brisk_error *err);

/* config_model.c: "model" or "models" into cfg (errors through the reader), and a resnet's
 * image size from data.images.size when the model does not give one. */
struct brisk_json_reader;
void brisk_config_read_models(struct brisk_json_reader *root, brisk_config *cfg);
void brisk_config_resnet_size_default(brisk_model_spec *m, const brisk_data_spec *d);

/* "123", "512MiB", "16G", "1.5 GB" -> bytes; 0 on success. */
int brisk_parse_bytes(const char *s, int64_t *out);
/* speed.precision's name as the config spells it ("auto", "bf16", ...) */
const char *brisk_precision_name(brisk_precision p);

/* weather_fit.c */
/* Log lines on what the data are: which field a shared name means (statics_note), the
 * times expver marks ERA5T. */
void brisk_weather_describe(const brisk_weather *w, const brisk_logger *log);
/* The grid a meshgnn trains on, for the checkpoint's "weather_grid" metadata:
 * {"nlat", "nlon", "lat": [first, last], "lon": [first, last], "channels": [...]}. */
char *brisk_weather_grid_json(const brisk_weather *w);
/* Refuses w when its grid or channels differ from the checkpoint's "weather_grid" (NULL:
 * a checkpoint from before it, nothing checked). */
brisk_status brisk_weather_check_grid(const char *ckpt, const char *grid_json, const brisk_weather *w, brisk_error *err);
/* Takes the model's grid from w (and, on a sphere, its extent) after checking that the
 * mesh fits it and that inputs and outputs match w's channels. */
brisk_status brisk_weather_fit_model(brisk_model_spec *m, const brisk_weather *w, const char *cfg_path,
                                     brisk_error *err);

#endif
