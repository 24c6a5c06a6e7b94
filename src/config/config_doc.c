/* The config reference: every key the config reader (config.c) asks for, with its type,
 * accepted values and default as the reader itself reports them (brisk_config_walk over one
 * config per model type), and one line of meaning from the table below. The table is the
 * only thing written by hand; a key the reader asks for that it lacks comes out marked
 * **undocumented**, and tests/cli/config_reference.sh fails on that and on any difference
 * from the checked-in docs/config.md. Adding a config key: add its line here, then run
 * `brisk config --reference > docs/config.md`. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk/train.h"
#include "core/strbuf.h"

/* "model(lstm).hidden" is looked up before "model.hidden", for keys whose meaning differs
 * between model types. */
static const struct { const char *key, *meaning; } meanings[] = {
    {"model(diffusion).hidden", "widths of the hidden layers of the denoiser"},
    {"model.type", "the model: mlp (tabular), diffusion (a conditional DDPM downscaler), lstm or transformer (windows of a series), meshgnn (a grid-mesh graph network forecasting the next step), resnet (a ResNet regressing image keypoints), graph (your own: a graph of layers), onnx (a network exported to ONNX, e.g. by torch.onnx.export, trained as a graph model)"},
    {"model(onnx).file", "onnx: the .onnx file (relative to the working directory, else to the config's folder); its nodes must all be ops brisk imports (docs/onnx.md)"},
    {"model(onnx).inputs", "onnx: the inputs as a graph model's, each named as an input of the ONNX graph (default: the ONNX graph's inputs, their first dim the batch; an error when a per-sample dim is not fixed there)"},
    {"model(onnx).outputs", "onnx: the ONNX values predict writes (default: the ONNX graph's outputs)"},
    {"model(onnx).losses", "onnx: the losses as a graph model's; output names an ONNX value (a node's output)"},
    {"model.inputs[].name", "graph: an input's name (a data field, mapped by data.fields; a loss's target is an input too)"},
    {"model.inputs[].shape", "graph: the input's shape per sample ([] for one number per sample)"},
    {"model.inputs[].dtype", "graph: f32, or i32 (class labels, embedding indices)"},
    {"model(graph).layers", "graph: the layers, each {\"name\", \"op\", \"inputs\", attributes}, in any order (sorted by their inputs)"},
    {"model.layers[].name", "graph: the layer's name, unique among inputs and layers; its parameters are \"<name>.weight\", ..."},
    {"model.layers[].op", "graph: the op (the table of ops below)"},
    {"model.layers[].inputs", "graph: names of model inputs or other layers, as many as the op takes"},
    {"model(graph).outputs", "graph: the layers whose values predict writes (the first is the model's output)"},
    {"model.losses", "graph: the losses; the training loss is their weighted sum"},
    {"model.losses[].output", "graph: the layer the loss reads"},
    {"model.losses[].target", "graph: the input (or layer) it is compared with"},
    {"model.losses[].type", "graph: cross_entropy (logits [N, C] against i32 labels [N]; validation accuracy follows the first such loss), mse, l1, huber (torch.nn.HuberLoss) or bce_with_logits (torch.nn.BCEWithLogitsLoss, f32 targets in [0, 1])"},
    {"model.losses[].delta", "graph: a huber loss's delta"},
    {"model.losses[].weight", "graph: the loss's weight in the sum"},
    {"model.losses[].mask", "graph: an input of weights per element (mse, l1, huber, bce_with_logits; broadcast to the output's shape): the loss is sum(w l) / sum(w), 0 where every weight is 0"},
    {"model.losses[].name", "graph: the loss's name in the log (default: its output layer's); with several losses each is logged on its own (the progress lines, epoch lines, metrics.jsonl and TensorBoard as loss/NAME, train_loss/NAME, val_loss/NAME), unweighted"},
    {"model.depth", "ResNet depth: 18 or 34 (BasicBlock) or 50 (Bottleneck)"},
    {"model.keypoints", "keypoints K regressed as (x, y) pairs: the data's y [K, 2]"},
    {"model.channels", "image channels at the input"},
    {"model.size", "image size the model is built for: [width, height], as data.images.size (absent: data.images.size, else [256, 256])"},
    {"model.visibility", "weight each keypoint's squared error by the data field visible (0 drops it; the mean stays over all 2K coordinates)"},
    {"model(meshgnn).inputs", "variables per grid node at the input (data.netcdf: channels x history + statics + time features)"},
    {"model(meshgnn).outputs", "variables per grid node predicted (as their next-step change)"},
    {"model(meshgnn).layers", "message-passing layers of the processor on the mesh"},
    {"model.latent", "width of every node and edge embedding and MLP"},
    {"model.grid", "the lat-lon grid: [rows, cols]; with data.netcdf refused (the files' coordinates decide it)"},
    {"model.lat", "metric sphere: the domain's latitudes [south, north] in degrees; with data.netcdf optional (the files' first latitude to one step past the last), and when given it must be the files' extent or that"},
    {"model.lon", "metric sphere: the domain's longitudes [west, east] in degrees, a span of at most 360; with data.netcdf optional as model.lat (longitudes passing 360 unwrapped)"},
    {"model.mesh", "the coarser mesh: [rows, cols]"},
    {"model.k", "grid-mesh edges: each grid node to its k nearest mesh nodes (and back)"},
    {"model.neighbours", "mesh edges: each mesh node from its nearest other mesh nodes"},
    {"model.recompute", "meshgnn: recompute each processor layer's activations in the backward instead of keeping them (less memory, one more forward of the processor; --recompute)"},
    {"model.icosahedral", "meshgnn over the globe: the mesh is an icosahedron refined this many times (0 to 7: 10 * 4^n + 2 nodes) instead of the \"mesh\" lattice; needs metric sphere, lat [-90, 90], a lon span of 360"},
    {"model.metric", "distances in the unit square (plane, as bench/reference/models.py) or great-circle on lat/lon (sphere)"},
    {"model.activation", "hidden-layer activation"},
    {"model.inputs", "features per sample (per time step for sequence models)"},
    {"model.outputs", "classes (classify) or target values (regress)"},
    {"model.seq_len", "time steps per sample; for an mlp, > 0 takes [seq_len, inputs] windows flattened"},
    {"model.hidden", "widths of the hidden layers, input side first"},
    {"model(lstm).hidden", "hidden units per LSTM layer and direction"},
    {"model.dropout", "dropout probability after each hidden layer (training only)"},
    {"model.task", "classify: softmax cross-entropy over outputs; regress: mean squared error"},
    {"model.layers", "stacked LSTM or encoder layers"},
    {"model.bidirectional", "an LSTM reading the window both ways (outputs concatenated)"},
    {"model.pool", "how the sequence becomes one vector: the last step, the mean, or a learned CLS token"},
    {"model.width", "model width (d_model) of the transformer"},
    {"model.heads", "attention heads; must divide width"},
    {"model.ffn", "feed-forward width inside each encoder layer"},
    {"model.norm", "layer norm before (pre) or after (post) each sublayer"},
    {"model.positions", "position encoding added to the inputs"},
    {"model.causal", "each step attends only to earlier steps"},
    {"model.padding_mask", "the model also takes a mask field marking padded steps"},
    {"model.fine", "values of the fine field (the diffusion model's output)"},
    {"model.coarse", "values of the coarse field it is conditioned on"},
    {"model.time_embedding", "width of the sinusoidal embedding of the noise step (even)"},
    {"model.noise.steps", "noise steps T of the diffusion process"},
    {"model.noise.schedule", "how beta grows from beta_start to beta_end"},
    {"model.noise.beta_start", "noise variance at the first step"},
    {"model.noise.beta_end", "noise variance at the last step"},
    {"model.noise.prediction", "what the network predicts: the noise or the clean field x0"},
    {"models", "instead of model: a list of model objects, each with a name and the keys of its type's model section, trained in turn on the same data, then compared"},
    {"models[].name", "the model's name: its run directory out_dir/<name> and its row in the comparison"},
    {"data.train", "the training data: .npz (fields are members) or .csv (fields are columns); with data.netcdf a NetCDF file, directory or glob; relative to the working directory, else to the config"},
    {"data.images.labels", "labels .csv (file[,category][,x0,y0,v0,...]; images beside it), the same as .json ({\"images\": [{\"file\", \"category\", \"keypoints\": [x0, y0, v0, ...]}]}), or an image array .npy/.npz; replaces data.train"},
    {"data.episodes", "episodic batches (few-shot pose): each training batch is a category drawn from data.images' categories, then support + query distinct samples of it, in that order; train.batch_size must be support + query"},
    {"data.episodes.support", "support samples per episode (the batch's first)"},
    {"data.episodes.query", "query samples per episode (after the support samples)"},
    {"data.images.size", "the images' size in pixels: one number or [width, height]"},
    {"data.images.mean", "per-channel mean subtracted after scaling pixels to [0, 1] (3 numbers; default 0)"},
    {"data.images.std", "per-channel std divided by after the mean (3 numbers; default 1)"},
    {"data.images.resize", "resize images of another size to data.images.size (bilinear); false: such an image is an error"},
    {"data.images.fit", "how resize fills data.images.size: stretch (each side scaled on its own) or pad (the aspect ratio kept, centred, the rest filled with the mean colour, i.e. 0 after normalisation; keypoints mapped alike, and back to each image's pixels by predict)"},
    {"data.images.orientation", "exif: pixels turned upright by the file's EXIF Orientation tag (JPEG APP1, PNG eXIf), as viewers and labelling tools show them, and labels read in that frame; raw: the stored pixels and frame, the tag ignored"},
    {"data.images.gray_to_rgb", "grayscale images copied to 3 channels; false: refused"},
    {"data.images.on_error", "a missing, corrupt or wrongly sized image: stop with an error naming it, or skip it and count it"},
    {"data.images.verify", "decode every image at load (catches corrupt pixel data before training; slower start)"},
    {"data.images.max_pixels", "images with more pixels are refused before any pixel memory is allocated"},
    {"data.images.workers", "decoding threads per loader; 0: half of brisk's threads (speed.threads, else OMP_NUM_THREADS or the CPUs this process may use), at most 8"},
    {"data.images.augment.flip", "probability of a horizontal flip (keypoints of each flip pair swapped)"},
    {"data.images.augment.crop", "a random crop keeping this fraction..1 of each side, resized back; 1: no crop"},
    {"data.images.augment.flip_pairs", "keypoint pairs swapped by a flip, flattened: [a0, b0, a1, b1, ...]"},
    {"data.validation", "a separate validation file (.npz or .csv like data.train; with data.images another labels file, its images in no way shared with data.images.labels); replaces validation_fraction"},
    {"data.validation_fraction", "share of the samples held out for validation (windows: the last rows, chronologically)"},
    {"data.shuffle", "shuffle the training samples every epoch"},
    {"data.shard_files", "with N ranks (mpirun), each loads only its 1/N contiguous rows of data.train (.npz or "
                         ".csv; the last rows mod N dropped) and shuffles within them; the split and validation "
                         "are per rank too, and the validation metrics are over all ranks' rows (sums all-reduced); resuming needs the "
                         "same world size"},
    {"data.buffer.capacity", "library API: samples the push buffer holds"},
    {"data.buffer.when_full", "library API: what a push into a full buffer does"},
    {"data.fields.FIELD", "where model field FIELD (x, y, ...) comes from: an npz member, or CSV columns as a list whose entries may be ranges \"first:last\" (header order)"},
    {"data.windows.features", "feature columns of the series, in the model's input order"},
    {"data.windows.length", "rows per window (the model's seq_len)"},
    {"data.windows.stride", "rows between the starts of consecutive windows"},
    {"data.windows.horizon", "rows after a window's last row whose value the target looks at"},
    {"data.normalize", "a table's (data.train with data.fields; mlp, lstm, transformer) inputs x and regression targets y standardised per column (per feature of a sequence) with the training split's mean and deviation, stored in checkpoints; predict, export and a session that loads the checkpoint apply it to raw inputs and give outputs in the target's units. auto: only a field with a column far from unit scale (|mean| > 3, deviation > 10 or < 0.1); true or \"standard\": always; false or \"none\": never; {\"inputs\": .., \"targets\": ..}: each. Refused with data.windows, data.images, data.netcdf, diffusion, resnet, meshgnn and graph models, and in a session's config (its data come in pushes)"},
    {"data.normalize.inputs", "x: true, false, \"auto\", \"standard\" or \"none\" (as data.normalize)"},
    {"data.normalize.targets", "y of a regression: as inputs; the loss is then in its standard units, validation MAE and RMSE in its own"},
    {"data.windows.normalize", "standardise features with the mean and deviation of the training rows (stored in checkpoints)"},
    {"data.windows.target.column", "the column the target is computed from"},
    {"data.windows.target.kind", "classes by thresholds on its change, the future value, or the change itself"},
    {"data.windows.target.change", "how the change is measured: relative, difference or log ratio"},
    {"data.windows.target.normalize", "regression targets learnt as (y - mean) / std of the training windows; predictions mapped back"},
    {"data.windows.target.thresholds", "ascending thresholds on the change: k thresholds make k + 1 classes"},
    {"data.netcdf.files", "NetCDF files, directories (their *.nc) or globs, one time axis; instead of data.train (which may also be one file, directory or glob)"},
    {"data.netcdf.variables", "the predicted fields, (time, lat, lon) or (time, level, lat, lon): each level a channel; the model's outputs are the channels"},
    {"data.netcdf.static", "fields read once, (lat, lon) (orography, land-sea mask), appended to every grid node's inputs"},
    {"data.netcdf.static_file", "a NetCDF file of static fields (ERA5's invariants: z, lsm over (time of 1, lat, lon)), perhaps global while the data are regional: a static it holds is read from it at the data's grid points, the others from the first data file; a name that is also a variable (z) is logged as which is which"},
    {"data.netcdf.history", "time steps of the channels in the input (t - history + 1 .. t); model.inputs = channels x history + statics (+ 2 time features)"},
    {"data.netcdf.lead", "time steps from the last input to the target (the change over them is learnt)"},
    {"data.netcdf.time_features", "add sin and cos of the local solar hour (from time's units and lon) to the inputs"},
    {"data.netcdf.missing", "missing values (NaN, _FillValue, missing_value): refuse (error naming file, variable, time and point) or mask (filled with the training mean, counted)"},
    {"data.netcdf.coordinates.time", "the time coordinate variable; \"\": time, else valid_time (the 2024+ CDS layout). Units \"UNIT since DATE\"; files with other epochs or units are converted to the first file's"},
    {"data.netcdf.coordinates.level", "the level coordinate of 3-D fields; \"\": any dimension between time and lat, its values from level, pressure_level, isobaricInhPa, plev or lev"},
    {"data.netcdf.coordinates.lat", "the latitude coordinate variable; \"\": lat, else latitude (either direction)"},
    {"data.netcdf.coordinates.lon", "the longitude coordinate variable; \"\": lon, else longitude (increasing; an axis passing 360 or 180 is unwrapped)"},
    {"optim.type", "the optimizer"},
    {"optim.lr", "peak learning rate"},
    {"optim.betas", "AdamW's [beta1, beta2]"},
    {"optim.eps", "AdamW's epsilon"},
    {"optim.weight_decay", "weight decay: adamw decoupled (the weights shrink by lr x weight_decay each step, as torch.optim.AdamW); sgd coupled (weight_decay x weight added to the gradient, as torch.optim.SGD)"},
    {"optim.momentum", "SGD momentum"},
    {"optim.nesterov", "SGD with Nesterov momentum"},
    {"optim.decay_biases", "apply weight decay to biases and norms too"},
    {"optim.clip_norm", "clip gradients to this global L2 norm; 0: off"},
    {"optim.schedule.type", "learning-rate schedule after warm-up"},
    {"optim.schedule.warmup_steps", "steps of linear warm-up from 0"},
    {"optim.schedule.min_lr_ratio", "the schedule's final learning rate as a fraction of lr"},
    {"train.batch_size", "samples per micro-batch, or \"auto\": the largest the memory fits (several ranks: each "
                         "rank's share of the training split and of its node's free memory)"},
    {"train.epochs", "passes over the training split"},
    {"train.max_steps", "stop after this many optimizer steps in all (a resumed run counts the steps before it); -1: train.epochs decides; 0: no step, the initial weights are written as the step-0 checkpoint"},
    {"train.seed", "seed of initialisation, shuffling, dropout and the split"},
    {"train.accumulate", "micro-batches per optimizer step, their gradients averaged (each micro-batch's loss is a mean over its samples: the update is that of the mean over accumulate x batch_size samples)"},
    {"train.checkpoint_every", "also write a checkpoint every N optimizer steps; 0: off"},
    {"train.log_every", "optimizer steps between progress lines; their loss is the mean over those steps (fewer in "
                        "a run's last line and in the first after a resume)"},
    {"train.out_dir", "run directory for checkpoints and metrics.jsonl"},
    {"train.keep_checkpoints", "numbered step-N checkpoints kept beside last.safetensors"},
    {"train.checkpoint_epochs", "a resumable checkpoint every this many epoch ends; 0: off"},
    {"train.checkpoint_minutes", "also checkpoint when this many minutes passed since the last; 0: off"},
    {"train.skip_nan_steps", "steps with a NaN or infinite loss skipped (no update) before the run stops"},
    {"train.max_skipped_fraction", "fp16 loss-scaler skips above this share of steps are reported"},
    {"speed.device", "where to train; auto: the GPU when one is usable"},
    {"speed.precision", "GPU arithmetic; auto: bf16 GEMM operands with fp32 master weights"},
    {"speed.prefetch", "batches the loader thread prepares ahead; 0: none"},
    {"speed.threads", "CPU threads; 0: OMP_NUM_THREADS, else SLURM_CPUS_PER_TASK, else the CPUs this process may use (affinity mask, cgroup quota), divided among the MPI ranks of a node that are not bound to CPUs of their own"},
    {"speed.cuda_graph", "GPU: capture the whole step as a CUDA graph"},
    {"speed.tf32", "GPU: fp32 GEMMs on TF32 tensor cores"},
    {"speed.autotune", "GPU: time GEMM algorithms per shape and cache the choice; false: the CPU's GEMM kernel by a fixed rule too"},
    {"speed.fuse", "fusion: on a GPU cuBLASLt epilogues (bias, activation and their gradients) and residual + layernorm; on the CPU the same patterns as one pass each (bit-identical results)"},
    {"speed.deterministic", "bit-identical runs for the same seed (GPU: no split-K, no timed choices; CPU: the GEMM kernel by a fixed rule)"},
    {"speed.conv_layout", "GPU: the layout cuDNN convolutions run in; auto: NCHW or NHWC, whichever is faster "
                          "with the transposes it costs (timed once per shape and cached; under bf16/fp16 also fp32 data with "
                          "TF32 math, kept where faster)"},
    {"speed.cpu_gemm", "CPU: auto|own|blas|fixed, the GEMM kernel per shape; auto: brisk's own sgemm or the BLAS, "
                       "whichever is faster (timed once per shape, cached beside speed.autotune_cache as "
                       "cpu-gemm-choice.txt); fixed: the compiled rule, no timing (what speed.deterministic and "
                       "speed.autotune false use); env BRISK_CPU_GEMM overrides"},
    {"speed.autotune_cache", "the GPU's GEMM autotune cache file (the CPU's and cuDNN's are kept beside it); \"\": BRISK_CACHE_DIR, else $XDG_CACHE_HOME/brisk, else ~/.cache/brisk (never creating a missing $HOME); \"-\": no cache on either device (as BRISK_CACHE_DIR=-)"},
    {"dist.bucket_mb", "several ranks: MiB of gradients per all-reduce bucket (default 1/16: measured, bench/DIST_NOTES.md)"},
    {"dist.timeout_s", "several ranks: seconds a collective may wait before the run fails naming the missing rank; "
                       "also how long MPI_Init may wait for a rank that never starts it"},
    {"dist.overlap", "several ranks, CPU: auto|on|off, the gradient all-reduce on a communication thread while "
                     "backward runs (on) or after it (off), the same bits; auto: the two timed in turn over the first steps "
                     "(16 each, after 3), every rank keeping the faster"},
    {"dist.shard_optimizer", "several ranks: ZeRO-1, each rank keeps and updates the optimizer moments of its shard only"},
    {"log.tensorboard", "write a TensorBoard event file (events.out.tfevents.*) into train.out_dir: the scalars of metrics.jsonl, the config, the optimization report"},
    {"log.histogram_every", "also histograms of every parameter every N optimizer steps in the event file; 0: off"},
    {"speed.memory_limit", "bytes the run may use (a number, or a string with a unit: \"512MiB\", \"16G\"); 0: what is available"},
    {"session.stop_signals", "library sessions only (brisk train refuses the section): install brisk's handlers for SIGTERM, SIGINT and SIGUSR1 at creation, each a stop request (off: the host program owns its signals)"},
    {"session.mpi_comm", "library sessions only: the host's MPI communicator as a Fortran handle (MPI_Comm_c2f(comm) in C, the integer communicator in Fortran), for data parallel training over its ranks; MPI must be initialised by the host and the handle valid (else an error, never an abort); -1: one process"},
    {"session.resume", "library sessions only: what creation does with a previous run in train.out_dir: refuse (an error naming these choices), auto (continue from its newest intact checkpoint: parameters, optimizer, step), overwrite (remove its checkpoints and metrics)"},
};

/* Where the reader's own report says less than the truth: a default computed from other keys
 * (the walks give them placeholder values) or a value of two types read by hand. */
static const struct { const char *key, *type, *def; } overrides[] = {
    {"model(diffusion).hidden", NULL, "[256, 256, 256]"},
    {"model(transformer).ffn", NULL, "4 x width"},
    {"optim.betas", NULL, "[0.9, 0.999]"},
    {"optim.weight_decay", NULL, "0.01 (adamw), 0 (sgd)"},
    {"train.out_dir", NULL, "\"runs/<config file's stem>\""},
    {"train.batch_size", "integer or \"auto\"", NULL},
    {"data.images.size", "integer or [w, h]", NULL},
    {"speed.memory_limit", "integer or string", NULL},
    {"data.fields.FIELD", "string or strings", NULL},
    {"data.normalize", "bool, string or object", "\"auto\""},
    {"data.normalize.inputs", "bool or string", "\"auto\""},
    {"data.normalize.targets", "bool or string", "\"auto\""},
};

/* One config per model type; together they make the reader ask for every key. */
static const struct { const char *section, *json; } walks[] = {
    {"mlp", "{\"model\": {\"type\": \"mlp\", \"inputs\": 1, \"outputs\": 1, \"hidden\": [1]},"
            " \"data\": {\"train\": \"d.npz\", \"fields\": {\"FIELD\": \"m\"},"
            " \"normalize\": {\"inputs\": \"auto\", \"targets\": \"auto\"}}}"},
    {"diffusion", "{\"model\": {\"type\": \"diffusion\", \"hidden\": [1]}}"},
    {"lstm", "{\"model\": {\"type\": \"lstm\", \"inputs\": 1, \"outputs\": 1, \"seq_len\": 1, \"hidden\": 1},"
             " \"data\": {\"train\": \"s.csv\", \"windows\": {\"features\": [\"a\"], \"length\": 1,"
             " \"target\": {\"column\": \"a\", \"thresholds\": [0]}}}}"},
    {"transformer", "{\"model\": {\"type\": \"transformer\", \"inputs\": 1, \"outputs\": 1, \"seq_len\": 1, \"width\": 1,"
                    " \"heads\": 1}, \"data\": {\"normalize\": \"auto\"}}"},
    {"mlp", "{\"model\": {\"type\": \"mlp\", \"inputs\": 1, \"outputs\": 1, \"hidden\": [1]},"
            " \"data\": {\"images\": {\"labels\": \"l.csv\", \"size\": 1, \"augment\": {}}}}"},
    {"meshgnn", "{\"model\": {\"type\": \"meshgnn\"}, \"data\": {\"netcdf\": {\"files\": [\"w.nc\"], \"variables\": [\"a\"]}}}"},
    {"meshgnn", "{\"model\": {\"type\": \"meshgnn\", \"metric\": \"sphere\", \"lat\": [0, 1], \"lon\": [0, 1]}}"},
    {"resnet", "{\"model\": {\"type\": \"resnet\"}, \"data\": {\"images\": {\"labels\": \"l.csv\", \"size\": 1},"
               " \"episodes\": {\"support\": 1}}}"},
    {"pipeline", "{\"models\": [{\"name\": \"a\", \"type\": \"mlp\", \"inputs\": 1, \"outputs\": 1}]}"},
    {"graph", "{\"model\": {\"type\": \"graph\", \"inputs\": [{\"name\": \"x\", \"shape\": [1]}],"
              " \"layers\": [{\"name\": \"l\", \"op\": \"relu\", \"inputs\": [\"x\"]}], \"outputs\": [\"l\"],"
              " \"losses\": [{\"output\": \"l\", \"target\": \"x\", \"type\": \"mse\"}]}}"},
    /* no file: the reader still asks for every key, then fails (ignored below) */
    {"onnx", "{\"model\": {\"type\": \"onnx\", \"file\": \"m.onnx\", \"inputs\": [{\"name\": \"x\", \"shape\": [1]}],"
             " \"outputs\": [\"y\"], \"losses\": [{\"output\": \"y\", \"target\": \"x\", \"type\": \"mse\"}]}}"},
};

typedef struct entry {
    char *path, *type, *accepts, *def, *section;
} entry;

typedef struct walk_state {
    entry *e;
    size_t n, cap;
    const char *section;
    int oom;
} walk_state;

static char *dup(const char *s) { return strdup(s ? s : ""); }

static void record(void *user, const brisk_json_key_info *k) {
    walk_state *w = user;
    char path[200];
    /* elements of "models" are model objects: only their name is the pipeline's own */
    if (strncmp(k->path, "models[", 7) == 0) {
        const char *dot = strchr(k->path, '.');
        if (!dot || strcmp(dot, ".name") != 0) return;
        snprintf(path, sizeof path, "models[].name");
    } else {
        /* an array's elements share their keys: "model.layers[3].name" is "model.layers[].name" */
        size_t o = 0;
        for (const char *c = k->path; *c && o + 1 < sizeof path; c++) {
            path[o++] = *c;
            if (*c == '[') {
                while (c[1] && c[1] != ']') c++;
            }
        }
        path[o] = 0;
    }
    /* a layer's attributes are its op's (the layer ops table below) */
    if (strncmp(path, "model.layers[].", 15) == 0 && strcmp(path + 15, "name") && strcmp(path + 15, "op") &&
        strcmp(path + 15, "inputs"))
        return;
    int model = strncmp(path, "model.", 6) == 0;
    for (size_t i = 0; i < w->n; i++) /* a key once; model keys once per model type */
        if (strcmp(w->e[i].path, path) == 0 && (!model || strcmp(w->e[i].section, w->section) == 0)) return;
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 128;
        entry *e = realloc(w->e, cap * sizeof *e);
        if (!e) { w->oom = 1; return; }
        w->e = e;
        w->cap = cap;
    }
    entry *e = &w->e[w->n++];
    e->path = dup(path);
    e->type = dup(k->type);
    e->accepts = dup(k->accepts);
    e->def = k->def ? dup(k->def) : NULL;
    e->section = dup(model ? w->section : "");
    if (!e->path || !e->type || !e->accepts || !e->section || (k->def && !e->def)) w->oom = 1;
}

static const char *meaning_of(const entry *e) {
    char typed[240];
    if (e->section[0] && strncmp(e->path, "model.", 6) == 0) {
        snprintf(typed, sizeof typed, "model(%s).%s", e->section, e->path + 6);
        for (size_t i = 0; i < sizeof meanings / sizeof meanings[0]; i++)
            if (strcmp(meanings[i].key, typed) == 0) return meanings[i].meaning;
    }
    for (size_t i = 0; i < sizeof meanings / sizeof meanings[0]; i++)
        if (strcmp(meanings[i].key, e->path) == 0) return meanings[i].meaning;
    return NULL;
}

static void override(const entry *e, const char **type, const char **def) {
    char typed[240];
    snprintf(typed, sizeof typed, "model(%s).%s", e->section, e->path[0] == 'm' ? e->path + 6 : "");
    for (size_t i = 0; i < sizeof overrides / sizeof overrides[0]; i++)
        if (strcmp(overrides[i].key, e->path) == 0 || (e->section[0] && strcmp(overrides[i].key, typed) == 0)) {
            if (overrides[i].type) *type = overrides[i].type;
            if (overrides[i].def) *def = overrides[i].def;
        }
}

static void table(brisk_strbuf *t, const walk_state *w, const char *section, const char *prefix) {
    brisk_strbuf_printf(t, "| key | type | accepts | default | meaning |\n|---|---|---|---|---|\n");
    for (size_t i = 0; i < w->n; i++) {
        const entry *e = &w->e[i];
        if (strcmp(e->section, section) != 0 || strncmp(e->path, prefix, strlen(prefix)) != 0) continue;
        if (!section[0] && strcmp(prefix, "model") == 0 && strncmp(e->path, "model.", 6) == 0) continue;
        const char *m = meaning_of(e), *type = e->type, *def = e->def;
        override(e, &type, &def);
        brisk_strbuf_printf(t, "| `%s` | %s | %s | %s%s%s | %s |\n", e->path, type, e->accepts[0] ? e->accepts : "any",
            def ? "`" : "", def ? def : "required", def ? "`" : "", m ? m : "**undocumented**");
    }
    brisk_strbuf_printf(t, "\n");
}

brisk_status brisk_config_reference(char **markdown, brisk_error *err) {
    *markdown = NULL;
    walk_state w = {0};
    brisk_status st = BRISK_OK;
    for (size_t i = 0; i < sizeof walks / sizeof walks[0] && !st; i++) {
        w.section = walks[i].section;
        st = brisk_config_walk(walks[i].json, "reference.json", record, &w, err);
        if (st && !strcmp(walks[i].section, "onnx")) st = BRISK_OK;
    }
    brisk_strbuf t = {0};
    if (!st) {
        brisk_strbuf_printf(&t, "# brisk config reference\n\n"
                "Generated by `brisk config --reference` from the config reader itself (`src/config/config.c`, "
                "meanings in `src/config/config_doc.c`); a test fails when this file and the reader differ.\n"
                "Configs are JSON with `//` and `/* */` comments; any key can be set from the command line with "
                "`--set KEY=VALUE` (e.g. `--set optim.lr=3e-4`). Unknown keys are errors. *accepts* is the range "
                "or the choices a value must have; *required* keys have no default.\n\n");
        static const char *const types[] = {"mlp", "diffusion", "lstm", "transformer", "meshgnn", "resnet", "graph", "onnx"};
        for (int k = 0; k < 8; k++) {
            brisk_strbuf_printf(&t, "## model (%s)\n\n", types[k]);
            table(&t, &w, types[k], "model.");
        }
        char *ops = brisk_layer_ops_reference();
        if (!ops) t.oom = 1;
        else brisk_strbuf_printf(&t, "### The ops of a graph model's layers\n\nA layer is {\"name\", \"op\", \"inputs\": [names], "
                     "attributes...}; its parameters are named \"<name>.weight\", \"<name>.bias\", ... as the PyTorch "
                     "module it mirrors. Dims count the batch (dim 1 is a sample's first).\n\n%s\n", ops);
        free(ops);
        brisk_strbuf_printf(&t, "## models (a pipeline)\n\n");
        table(&t, &w, "", "models");
        static const char *const sections[] = {"data", "optim", "train", "speed", "dist", "log", "session"};
        for (int k = 0; k < 7; k++) {
            brisk_strbuf_printf(&t, "## %s\n\n", sections[k]);
            char prefix[16];
            snprintf(prefix, sizeof prefix, "%s.", sections[k]);
            table(&t, &w, "", prefix);
        }
    }
    for (size_t i = 0; i < w.n; i++) {
        free(w.e[i].path), free(w.e[i].type), free(w.e[i].accepts), free(w.e[i].def), free(w.e[i].section);
    }
    free(w.e);
    if (!st && (w.oom || t.oom)) st = brisk_errorf(err, BRISK_ERR_NOMEM, "config reference: out of memory");
    if (st) free(t.s);
    else *markdown = t.s;
    return st;
}
