/*
 * zmq_utils.h - kept for programs written against old ZeroMQ releases.
 *
 * Everything it used to declare (stopwatch, sleep, threads, atomic counters, Z85, CURVE key
 * helpers) is declared by zmq.h, which this header includes.
 *
 * SPDX-License-Identifier: MPL-2.0
 */

#ifndef __ZMQ_UTILS_H_INCLUDED__
#define __ZMQ_UTILS_H_INCLUDED__

#include "zmq.h"

#endif /* __ZMQ_UTILS_H_INCLUDED__ */
