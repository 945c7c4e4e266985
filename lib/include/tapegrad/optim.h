#pragma once
// All of tg::optim: the optimizers, the LR schedulers, and gradient clipping
// (tg::nn::utils::clip_grad_norm_, clip_grad_value_).
#include "tapegrad/optim/adam.h"
#include "tapegrad/optim/clip.h"
#include "tapegrad/optim/lr_scheduler.h"
#include "tapegrad/optim/optimizer.h"
#include "tapegrad/optim/rmsprop.h"
#include "tapegrad/optim/sgd.h"
