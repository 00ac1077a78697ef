#ifndef GPUCMDD_BASE_BATCH_SCHEDULING_H_
#define GPUCMDD_BASE_BATCH_SCHEDULING_H_

// Note [Device work yields to the control plane]
// The CPU driver runs device work (kernels in the executor, the stream workers that feed
// it) on the same cores as the threads answering clients. Device work is throughput
// work: nobody waits on the microsecond it starts in. An answer is latency: a client's
// Launch returns as soon as its kernel is queued, and the stream worker it wakes, and
// the executor that worker wakes, would otherwise preempt the thread sending that answer
// or the client receiving it. Linux's SCHED_BATCH policy says exactly this: a batch
// thread keeps its fair share of the CPU, but its wake-ups never preempt a running
// thread. (Measured in docs/BENCHMARKS.md, "Device work yields to the answer".)
//
// Thread-safety: applies to the calling thread only; threads it starts later inherit it.

namespace gpucmd {

// Puts the calling thread under SCHED_BATCH. False when the system refuses (a
// scheduling hint is never a reason to fail).
bool ScheduleThisThreadAsBatchWork();

}  // namespace gpucmd

#endif  // GPUCMDD_BASE_BATCH_SCHEDULING_H_
