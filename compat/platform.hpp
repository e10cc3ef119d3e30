/* SPDX-License-Identifier: MPL-2.0 */
/*
 * compat/platform.hpp - the build configuration libzmq's tests read, for Linux.
 *
 * libzmq's build generates src/platform.hpp (builds/cmake/platform.hpp.in, configure.ac); its
 * tests include it through testutil.hpp to learn what the library under test was built with.
 * compat/run-libzmq-tests.sh generates <tree>/src/platform.hpp per library under test: it defines
 * that library's capabilities (ZMQ_HAVE_IPC, ZMQ_HAVE_CURVE, ZMQ_HAVE_TIPC, ...: the zmq_has()
 * answers that library is expected to give) and then includes this file, which holds what a
 * CMake build of libzmq 4.3.5 on x86_64 Linux with glibc defines.
 */

#ifndef __ZMQ_COMPAT_PLATFORM_HPP_INCLUDED__
#define __ZMQ_COMPAT_PLATFORM_HPP_INCLUDED__

#define ZMQ_USE_CV_IMPL_STL11
#define ZMQ_IOTHREAD_POLLER_USE_EPOLL
#define ZMQ_IOTHREAD_POLLER_USE_EPOLL_CLOEXEC
#define ZMQ_HAVE_PPOLL
#define ZMQ_POLL_BASED_ON_POLL

#define HAVE_POSIX_MEMALIGN 1
#define ZMQ_CACHELINE_SIZE 64

#define HAVE_FORK
#define HAVE_CLOCK_GETTIME
#define HAVE_MKDTEMP
#define ZMQ_HAVE_UIO

#define ZMQ_HAVE_NOEXCEPT

#define ZMQ_HAVE_EVENTFD
#define ZMQ_HAVE_EVENTFD_CLOEXEC
#define ZMQ_HAVE_IFADDRS
#define ZMQ_HAVE_SO_BINDTODEVICE

#define ZMQ_HAVE_SO_PEERCRED
#define ZMQ_HAVE_BUSY_POLL

#define ZMQ_HAVE_O_CLOEXEC

#define ZMQ_HAVE_SOCK_CLOEXEC
#define ZMQ_HAVE_SO_KEEPALIVE
#define ZMQ_HAVE_SO_PRIORITY
#define ZMQ_HAVE_TCP_KEEPCNT
#define ZMQ_HAVE_TCP_KEEPIDLE
#define ZMQ_HAVE_TCP_KEEPINTVL
#define ZMQ_HAVE_PTHREAD_SETNAME_2
#define ZMQ_HAVE_PTHREAD_SET_AFFINITY
#define HAVE_ACCEPT4
#define HAVE_STRNLEN

#define ZMQ_HAVE_STRUCT_SOCKADDR_UN
#define HAVE_IF_NAMETOINDEX

/* ZMQ_USE_EPOLL is not defined, as in libzmq's own build (which names the poller
 * ZMQ_IOTHREAD_POLLER_USE_EPOLL): test_ctx_options' ZMQ_SOCKET_LIMIT branch under it does not
 * compile (it names an undeclared `ctx`). */

#if defined __linux__
#define ZMQ_HAVE_LINUX
#endif

#endif
