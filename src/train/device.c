/* Which backend a run trains on, decided at setup. speed.device cpu: the CPU. cuda: the
 * GPU or an error saying why not. auto: the GPU when there is a usable one, else the CPU,
 * saying why. Then, once the graph and its plan exist, every node of the training
 * schedule is put to the chosen backend's supports_op: a GPU without a kernel for some
 * op makes an auto run train on the CPU (the reason goes into the run report) and a cuda
 * run stop with an error naming the op and the reason, before any device memory is
 * allocated and never first at step 1. */
#include <stdio.h>
#include <string.h>

#include "brisk/cuda.h"
#include "brisk/system.h"
#include "train/trainer_internal.h"

/* The GEMM precision a CUDA run uses: auto = bf16 where the GPU has it (else fp16);
 * fp32 runs on TF32 tensor cores unless speed.tf32 is false. */
static brisk_gemm_precision gpu_precision(const brisk_speed_spec *sp, const brisk_cuda_info *gi) {
    switch (sp->precision) {
    case BRISK_PREC_FP32: return sp->tf32 && gi->tf32 ? BRISK_GEMM_TF32 : BRISK_GEMM_FP32;
    case BRISK_PREC_TF32: return BRISK_GEMM_TF32;
    case BRISK_PREC_BF16: return BRISK_GEMM_BF16;
    case BRISK_PREC_FP16: return BRISK_GEMM_FP16;
    default: return gi->bf16 ? BRISK_GEMM_BF16 : BRISK_GEMM_FP16;
    }
}

static brisk_status pick_gpu(brisk_trainer *t, brisk_error *err) {
    const brisk_speed_spec *sp = &t->cfg.speed;
    brisk_cuda_info gi;
    brisk_cuda_probe(0, &gi);
    brisk_cuda_options o;
    brisk_cuda_options_default(&o);
    /* one process per GPU: a node's ranks take its GPUs in local-rank order (a task that
     * sees one GPU, as SLURM's --gpus-per-task gives, takes it) */
    if (gi.device_count > 1) o.device = brisk_dist_env_local_rank() % gi.device_count;
    o.precision = gpu_precision(sp, &gi);
    o.autotune = sp->autotune;
    o.fuse = sp->fuse;
    o.deterministic = sp->deterministic;
    o.conv_layout = (brisk_conv_layout)sp->conv_layout;
    snprintf(o.autotune_cache, sizeof o.autotune_cache, "%s", sp->autotune_cache);
    o.log = t->log;
    brisk_status st = brisk_backend_cuda_create(&o, &t->be, err);
    if (st) brisk_error_prefix(err, "%s: speed.device", t->cfg.path);
    return st;
}

/* The CPU backend; why_not_gpu ("" for none) ends the device line of the run report. */
static brisk_status use_cpu(const brisk_config *cfg, const brisk_logger *log, brisk_backend **be, const char *why_not_gpu,
                            brisk_error *err) {
    brisk_system_info si;
    brisk_system_probe(&si);
    brisk_thread_plan tp;
    brisk_threads_resolve(cfg->speed.threads, "speed.threads", &tp);
    if (tp.warning[0]) brisk_log(log, BRISK_LOG_WARN, "%s", tp.warning);
    if (cfg->speed.precision != BRISK_PREC_AUTO && cfg->speed.precision != BRISK_PREC_FP32)
        brisk_log(log, BRISK_LOG_WARN, "%s: speed.precision: the CPU backend trains in fp32 "
                  "(tf32, bf16 and fp16 are GPU modes)", cfg->path);
    /* a timed choice can differ between runs: deterministic runs take the fixed rule */
    brisk_cpu_gemm_mode gm = (brisk_cpu_gemm_mode)cfg->speed.cpu_gemm;
    if (gm == BRISK_CPU_GEMM_AUTO && (cfg->speed.deterministic || !cfg->speed.autotune)) gm = BRISK_CPU_GEMM_FIXED;
    brisk_cpu_gemm_configure(gm, cfg->speed.autotune_cache);
    *be = brisk_backend_cpu_new(tp.threads);
    if (!*be) return brisk_errorf(err, BRISK_ERR_NOMEM, "out of memory creating the CPU backend");
    if (!cfg->speed.fuse) brisk_backend_cpu_set_fuse(*be, 0); /* else BRISK_CPU_FUSE decides, on by default */
    brisk_log(log, BRISK_LOG_INFO, "device    cpu: %s, %d thread%s (%s), %s, BLAS %s%s%s", si.cpu_model, tp.threads,
              tp.threads == 1 ? "" : "s", tp.source, si.simd, si.blas_name, why_not_gpu[0] ? "; " : "", why_not_gpu);
    return BRISK_OK;
}

brisk_status brisk_device_pick(brisk_trainer *t, brisk_error *err) {
    brisk_system_info si;
    brisk_system_probe(&si);
    if (t->cfg.speed.device == BRISK_DEVICE_CUDA && !si.gpu_usable)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: speed.device is \"cuda\", but %s", t->cfg.path, si.gpu_reason);
    char why[sizeof err->msg + 16] = "";
    if (t->cfg.speed.device != BRISK_DEVICE_CPU && si.gpu_usable) {
        brisk_status st = pick_gpu(t, err);
        if (!st || t->cfg.speed.device == BRISK_DEVICE_CUDA) return st;
        brisk_log(&t->log, BRISK_LOG_WARN, "%s; training on the CPU", err->msg);
        snprintf(why, sizeof why, "GPU not used: %s", err->msg);
    } else if (t->cfg.speed.device == BRISK_DEVICE_AUTO) {
        snprintf(why, sizeof why, "no GPU: %s", si.gpu_reason);
    }
    return use_cpu(&t->cfg, &t->log, &t->be, why, err);
}

brisk_status brisk_device_check_graph(const brisk_config *cfg, const brisk_logger *log, brisk_backend **be,
                                      const brisk_graph *g, const brisk_plan *plan, char *note, size_t note_size,
                                      brisk_error *err) {
    if (note_size) note[0] = 0;
    char why[512];
    if (brisk_backend_first_unsupported(*be, g, plan, why, sizeof why) < 0) return BRISK_OK;
    const char *name = (*be)->name;
    if (cfg->speed.device != BRISK_DEVICE_AUTO || strcmp(name, "cpu") == 0)
        return brisk_errorf(err, BRISK_ERR_UNSUPPORTED, "%s: speed.device is \"%s\", but the %s backend cannot run "
                            "this model: %s%s", cfg->path, cfg->speed.device == BRISK_DEVICE_CUDA ? "cuda" : "cpu",
                            name, why, strcmp(name, "cpu") ? "; use speed.device \"auto\" or \"cpu\"" : "");
    snprintf(note, note_size, "GPU not used: the %s backend cannot run this model: %s", name, why);
    brisk_log(log, BRISK_LOG_WARN, "%s; training on the CPU", note);
    (*be)->destroy(*be);
    *be = NULL;
    return use_cpu(cfg, log, be, note, err);
}
