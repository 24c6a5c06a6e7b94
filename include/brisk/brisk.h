/* brisk: fast neural-network training in C. One include for the whole library.
 * brisk/api.h is the stable API (a training session: create, push, train, save/load, predict,
 * sample, query, destroy); the other headers are module interfaces that may change. */
#ifndef BRISK_H
#define BRISK_H

#include "brisk/api.h"
#include "brisk/core.h"
#include "brisk/json.h"
#include "brisk/graph.h"
#include "brisk/nn.h"
#include "brisk/optim.h"
#include "brisk/data.h"
#include "brisk/dist.h"
#include "brisk/safetensors.h"
#include "brisk/train.h"
#include "brisk/system.h"
#include "brisk/cuda.h"
#include "brisk/sample.h"

#endif
