/* A meshgnn's model fitted to the NetCDF weather files it trains or predicts on: the grid
 * (and on a sphere its extent) comes from the files, inputs and outputs must match their
 * channels, and a checkpoint's grid must be the files' grid. Used by the trainer
 * (train/weather.c) and by prediction and rollouts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/json.h"
#include "brisk/nn.h"
#include "config/config_internal.h"

/* The sphere's domain is the file's: rows from the first latitude (south) to one step past
 * the last (at most 90), columns likewise (at most a full circle), the lattice the graph
 * places the grid on. A domain the config gives must be the files' extent (first and last
 * coordinate) or that domain. */
static brisk_status fit_domain(brisk_gnn_graph_spec *g, const brisk_weather *w, const char *cfg_path, brisk_error *err) {
    const char *file = brisk_weather_first_file(w), *latn, *lonn, *timen;
    brisk_weather_coord_names(w, &timen, &latn, &lonn);
    if (w->nlat < 2 || w->nlon < 2)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: a %lld x %lld grid: the sphere metric needs at least 2 values of "
                            "'%s' and of '%s' (their step is the grid's)", file, (long long)w->nlat, (long long)w->nlon,
                            latn, lonn);
    double dlat = w->lat[1] - w->lat[0], dlon = w->lon[1] - w->lon[0];
    double lat0 = w->lat[0], lat1 = fmin(90.0, lat0 + (double)w->nlat * dlat), last_lat = w->lat[w->nlat - 1];
    double lon0 = w->lon[0], lon1 = fmin(lon0 + 360.0, lon0 + (double)w->nlon * dlon), last_lon = w->lon[w->nlon - 1];
    const double tol = 1e-4; /* degrees */
    if (!isnan(g->lat0) && !(fabs(g->lat0 - lat0) <= tol && (fabs(g->lat1 - last_lat) <= tol || fabs(g->lat1 - lat1) <= tol)))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: model.lat [%g, %g], but %s's '%s' runs from %g to %g (every %g "
                            "degrees): the mesh's domain comes from the file; remove model.lat or give [%g, %g]", cfg_path,
                            g->lat0, g->lat1, file, latn, lat0, last_lat, dlat, lat0, last_lat);
    double span = g->lon1 - g->lon0;
    if (!isnan(g->lon0) && !(fabs(remainder(g->lon0 - lon0, 360.0)) <= tol &&
                             (fabs(span - (last_lon - lon0)) <= tol || fabs(span - (lon1 - lon0)) <= tol)))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: model.lon [%g, %g], but %s's '%s' runs from %g to %g (every %g "
                            "degrees%s): the mesh's domain comes from the file; remove model.lon or give [%g, %g]", cfg_path,
                            g->lon0, g->lon1, file, lonn, lon0, last_lon, dlon, w->lon_turns ? ", unwrapped past 360" : "",
                            lon0, last_lon);
    g->lat0 = lat0, g->lat1 = lat1, g->lon0 = lon0, g->lon1 = lon1;
    return BRISK_OK;
}

brisk_status brisk_weather_fit_model(brisk_model_spec *m, const brisk_weather *w, const char *cfg_path,
                                     brisk_error *err) {
    const char *file = brisk_weather_first_file(w), *latn, *lonn, *timen;
    brisk_weather_coord_names(w, &timen, &latn, &lonn);
    if (m->type != BRISK_MODEL_MESHGNN)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: data.netcdf feeds a meshgnn model, not a %s", cfg_path,
                            brisk_model_type_name(m->type));
    brisk_gnn_graph_spec *g = &m->mesh;
    if (!g->icosahedral && (w->nlat < g->mesh_rows || w->nlon < g->mesh_cols))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: variables '%s' and '%s': the grid (%lld x %lld) is smaller than "
                            "the mesh of model.mesh (%lld x %lld) in %s", file, latn, lonn, (long long)w->nlat,
                            (long long)w->nlon, (long long)g->mesh_rows, (long long)g->mesh_cols, cfg_path);
    if (g->icosahedral && w->grid < brisk_gnn_mesh_nodes(g))
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: the grid of '%s' and '%s' (%lld x %lld) is smaller than the "
                            "icosahedral mesh of model.icosahedral %d (%lld nodes) in %s", file, latn, lonn,
                            (long long)w->nlat, (long long)w->nlon, g->icosahedral - 1,
                            (long long)brisk_gnn_mesh_nodes(g), cfg_path);
    if (m->inputs != w->inputs || m->outputs != w->channels)
        return brisk_errorf(err, BRISK_ERR_INVALID, "%s: model.inputs %lld and model.outputs %lld, but %s gives %d inputs "
                            "(%d channels x history %d + %d statics%s) and %d outputs (the channels)", cfg_path,
                            (long long)m->inputs, (long long)m->outputs, file, w->inputs, w->channels, w->history,
                            w->nstatics, w->inputs > w->history * w->channels + w->nstatics ? " + 2 time features" : "",
                            w->channels);
    g->grid_rows = w->nlat, g->grid_cols = w->nlon; /* the graph is the file's grid */
    /* cached beside the data: a run over the same domain skips the nearest-node search */
    const char *slash = strrchr(file, '/');
    if (!slash) snprintf(g->cache_dir, sizeof g->cache_dir, ".");
    else if ((size_t)(slash - file) < sizeof g->cache_dir)
        snprintf(g->cache_dir, sizeof g->cache_dir, "%.*s", (int)(slash - file), file);
    return g->metric == BRISK_GNN_SPHERE ? fit_domain(g, w, cfg_path, err) : BRISK_OK;
}

char *brisk_weather_grid_json(const brisk_weather *w) {
    size_t cap = 256 + (size_t)w->channels * (BRISK_FIELD_NAME_MAX + 4), k;
    char *s = malloc(cap);
    if (!s) return NULL;
    k = (size_t)snprintf(s, cap, "{\"nlat\": %lld, \"nlon\": %lld, \"lat\": [%.9g, %.9g], \"lon\": [%.9g, %.9g], "
                         "\"channels\": [", (long long)w->nlat, (long long)w->nlon, w->lat[0], w->lat[w->nlat - 1],
                         w->lon[0], w->lon[w->nlon - 1]);
    for (int c = 0; c < w->channels && k < cap; c++)
        k += (size_t)snprintf(s + k, cap - k, "%s\"%s\"", c ? ", " : "", w->channel[c]);
    if (k < cap) snprintf(s + k, cap - k, "]}");
    return s;
}

brisk_status brisk_weather_check_grid(const char *ckpt, const char *grid_json, const brisk_weather *w, brisk_error *err) {
    if (!grid_json) return BRISK_OK;
    char label[BRISK_PATH_MAX + 32];
    snprintf(label, sizeof label, "%s:weather_grid", ckpt);
    brisk_json *doc = NULL;
    brisk_status st = brisk_json_parse(grid_json, strlen(grid_json), label, &doc, err);
    if (st) return st;
    brisk_json_reader r = brisk_json_root(doc);
    int64_t nlat = 0, nlon = 0;
    double *lat = NULL, *lon = NULL;
    const char **ch = NULL;
    size_t nla = 0, nlo = 0, nch = 0;
    brisk_json_int64(&r, "nlat", 1, INT64_C(1) << 28, &nlat);
    brisk_json_int64(&r, "nlon", 1, INT64_C(1) << 28, &nlon);
    brisk_json_numbers(&r, "lat", true, BRISK_ANY, &lat, &nla);
    brisk_json_numbers(&r, "lon", true, BRISK_ANY, &lon, &nlo);
    brisk_json_strings(&r, "channels", true, &ch, &nch);
    if (!(st = brisk_json_finish(doc, err)) && (nla != 2 || nlo != 2))
        st = brisk_errorf(err, BRISK_ERR_FORMAT, "%s: expected [first, last] for lat and lon", label);
    const char *file = brisk_weather_first_file(w), *timen, *latn, *lonn;
    brisk_weather_coord_names(w, &timen, &latn, &lonn);
    if (!st && (nlat != w->nlat || nlon != w->nlon || fabs(lat[0] - w->lat[0]) > 1e-4 ||
                fabs(lat[1] - w->lat[w->nlat - 1]) > 1e-4 || fabs(remainder(lon[0] - w->lon[0], 360.0)) > 1e-4 ||
                fabs((lon[1] - lon[0]) - (w->lon[w->nlon - 1] - w->lon[0])) > 1e-4))
        st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: a %lld x %lld grid ('%s' %g to %g, '%s' %g to %g), but %s was trained "
                          "on %lld x %lld (latitude %g to %g, longitude %g to %g): a meshgnn's graph is built for the grid "
                          "it trained on; give data on that grid", file, (long long)w->nlat, (long long)w->nlon, latn,
                          w->lat[0], w->lat[w->nlat - 1], lonn, w->lon[0], w->lon[w->nlon - 1], ckpt, (long long)nlat,
                          (long long)nlon, lat[0], lat[1], lon[0], lon[1]);
    for (size_t c = 0; !st && c < nch; c++)
        if (nch != (size_t)w->channels || strcmp(ch[c], w->channel[c]))
            st = brisk_errorf(err, BRISK_ERR_INVALID, "%s: channel %zu is '%s', but %s was trained with '%s' there (%zu "
                              "channels): the same variables and levels are needed", file, c,
                              c < (size_t)w->channels ? w->channel[c] : "(none)", ckpt, ch[c], nch);
    free(lat);
    free(lon);
    free(ch);
    brisk_json_free(doc);
    return st;
}

void brisk_weather_describe(const brisk_weather *w, const brisk_logger *log) {
    if (w->statics_note[0]) brisk_log(log, BRISK_LOG_INFO, "data      %s", w->statics_note);
    if (w->era5t_times) {
        char a[48];
        brisk_weather_date(w, w->time[w->era5t_first], a, sizeof a);
        brisk_log(log, BRISK_LOG_INFO, "data      %lld of %lld times are ERA5T (expver 0005: preliminary data ECMWF may "
                  "still revise), the first %s", (long long)w->era5t_times, (long long)w->ntimes, a);
    }
}
