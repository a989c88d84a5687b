// Holds the stream: one thread waits `ns` nanoseconds of %globaltimer. Queued ahead of the
// timed launches (harness.time_steps), it keeps the GPU busy while the host enqueues them,
// so that the CUDA events around each launch time the GPU's work and not the host's
// enqueue gaps (a Python library can spend 30-70 us of host time on a launch).
extern "C" __global__ void paprof_spin(unsigned long long ns) {
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        __nanosleep(1000);
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
