/* The layout decision of cuDNN convolutions (conv_layout.h). Built in every build. */
#include "backend/cuda/conv_layout.h"

#include <stdio.h>
#include <string.h>

int conv_data_type(brisk_gemm_precision precision) {
    return precision == BRISK_GEMM_BF16 ? 1 : precision == BRISK_GEMM_FP16 ? 2 : 0;
}

conv_math conv_math_of(brisk_gemm_precision precision) {
    switch (precision) {
    case BRISK_GEMM_FP32: return CONV_MATH_FP32;
    case BRISK_GEMM_BF16: return CONV_MATH_BF16;
    case BRISK_GEMM_FP16: return CONV_MATH_FP16;
    default: return CONV_MATH_TF32;
    }
}

conv_math conv_math_of_form(int dt, int fma) {
    return dt == 1 ? CONV_MATH_BF16 : dt == 2 ? CONV_MATH_FP16 : fma ? CONV_MATH_FP32 : CONV_MATH_TF32;
}

int conv_precision_pick(double narrow_ms, double wide_ms) {
    if (wide_ms < 0) return 0;
    return narrow_ms < 0 || wide_ms < narrow_ms;
}

int conv_layout_parse(const char *name) {
    if (!name) return -1;
    if (!strcmp(name, "auto")) return BRISK_CONV_LAYOUT_AUTO;
    if (!strcmp(name, "nchw")) return BRISK_CONV_LAYOUT_NCHW;
    if (!strcmp(name, "nhwc")) return BRISK_CONV_LAYOUT_NHWC;
    return -1;
}

const char *conv_layout_name(brisk_conv_layout mode) {
    return mode == BRISK_CONV_LAYOUT_NCHW ? "nchw" : mode == BRISK_CONV_LAYOUT_NHWC ? "nhwc" : "auto";
}

static void say(char *why, size_t n, const char *text) {
    if (why && n) snprintf(why, n, "%s", text);
}

int conv_layout_rule(brisk_conv_layout mode, int data_type, int data_nhwc, int64_t c, int64_t co, char *why,
                     size_t why_size) {
    if (mode == BRISK_CONV_LAYOUT_NCHW || mode == BRISK_CONV_LAYOUT_NHWC) {
        say(why, why_size, "speed.conv_layout");
        return mode == BRISK_CONV_LAYOUT_NHWC;
    }
    if (data_type != 0 && c % 8 == 0 && co % 8 == 0) {
        say(why, why_size, "rule: 16-bit data, channels multiples of 8");
        return 1;
    }
    say(why, why_size, "rule: the graph's layout");
    return data_nhwc != 0;
}

int conv_layout_pick(brisk_conv_layout mode, const conv_layout_costs *c, int data_nhwc, char *why, size_t why_size) {
    int ok[2] = {c->conv_ms[0] >= 0, c->conv_ms[1] >= 0};
    if (!ok[0] && !ok[1]) {
        say(why, why_size, "no algorithm in either layout");
        return -1;
    }
    if (mode == BRISK_CONV_LAYOUT_NCHW || mode == BRISK_CONV_LAYOUT_NHWC) {
        int want = mode == BRISK_CONV_LAYOUT_NHWC;
        say(why, why_size, ok[want] ? "speed.conv_layout" : "speed.conv_layout's layout has no algorithm");
        return ok[want] ? want : !want;
    }
    if (!ok[0] || !ok[1]) {
        say(why, why_size, "timed: the other layout has no algorithm");
        return ok[1];
    }
    double t[2] = {c->conv_ms[0] + c->convert_ms[0], c->conv_ms[1] + c->convert_ms[1]};
    int d = data_nhwc != 0;
    say(why, why_size, "timed");
    /* the graph's layout unless the other is strictly faster, conversions included */
    return t[!d] < t[d] ? !d : d;
}

int conv_operand_converted(int role, int dt, int nhwc, int data_nhwc) {
    if (dt != 0) return 1;
    return role == 1 ? nhwc != 0 : (nhwc != 0) != (data_nhwc != 0); /* w is OIHW in the graph */
}

brisk_status conv_cache_layout_key(const conv_algo_device *dev, const conv_algo_shape *s, int data_nhwc, char *out,
                                   size_t out_size, brisk_error *err) {
    conv_algo_shape k = *s;
    k.nhwc = data_nhwc ? CONV_KEY_CHOICE_FROM_NHWC : CONV_KEY_CHOICE_FROM_NCHW;
    return conv_cache_key(dev, &k, out, out_size, err);
}

brisk_status conv_layout_parse_refused(const char *spec, unsigned *mask, brisk_error *err) {
    *mask = 0;
    for (const char *at = spec ? spec : ""; *at;) {
        size_t len = strcspn(at, ",");
        if (len == 4 && !strncmp(at, "nchw", 4)) *mask |= 1;
        else if (len == 4 && !strncmp(at, "nhwc", 4)) *mask |= 2;
        else {
            *mask = 0;
            return brisk_errorf(err, BRISK_ERR_INVALID, CONV_REFUSE_LAYOUTS_ENV " is \"%s\": \"%.*s\" is not nchw or "
                                "nhwc (expected a comma-separated list of them)", spec, (int)len, at);
        }
        at += len + (at[len] == ',');
    }
    return BRISK_OK;
}
