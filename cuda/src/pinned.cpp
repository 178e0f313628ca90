/* pinned.cpp: the caching allocator of pinned (page-locked) host memory, for
   t:pin_memory() and the asynchronous copies from it. cudaHostAlloc and
   cudaFreeHost are slow (the latter synchronises the device) and a loader
   pins a batch of the same size every step, so a freed block goes to a free
   list of its size class (size_class.h). A block is freed while a copy
   queued from it may still be reading it; so freeing records an event on the
   legacy default stream, where all the backend's work is queued, and the
   block is handed out again only once that event has completed: a new owner
   never writes a block an earlier copy still reads. */
#include "cuda_backend.h"
#include "size_class.h"

#include <mutex>
#include <new>
#include <unordered_map>
#include <vector>

namespace {

struct block {
    void *p;
    int cls;
    cudaEvent_t done;   /* recorded when the block was last freed */
};

std::mutex lock;
std::unordered_map<void *, block> in_use;
std::vector<block> free_blocks[ECU_NCLASSES];

/* a free block of class c whose last copies have finished, or none */
bool take_free(int c, block *out)
{
    std::vector<block> &list = free_blocks[c];
    for (size_t k = 0; k < list.size(); k++) {
        if (cudaEventQuery(list[k].done) != cudaSuccess) continue;
        *out = list[k];
        list[k] = list.back();
        list.pop_back();
        return true;
    }
    cudaGetLastError();   /* cudaErrorNotReady */
    return false;
}

bool make_block(int c, block *out)
{
    out->cls = c;
    if (cudaHostAlloc(&out->p, ecu_class_bytes(c), cudaHostAllocDefault) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    if (cudaEventCreateWithFlags(&out->done, cudaEventDisableTiming) != cudaSuccess) {
        cudaGetLastError();
        cudaFreeHost(out->p);
        return false;
    }
    return true;
}

}   // namespace

void *ecu_host_alloc(size_t nbytes)
{
    int c = ecu_size_class(nbytes);
    std::lock_guard<std::mutex> hold(lock);
    block b;
    if (!take_free(c, &b) && !make_block(c, &b)) return nullptr;
    try {
        in_use.emplace(b.p, b);
    } catch (const std::bad_alloc &) {
        free_blocks[c].push_back(b);   /* its event has completed: it stays reusable */
        return nullptr;
    }
    return b.p;
}

void ecu_host_free(void *p)
{
    std::lock_guard<std::mutex> hold(lock);
    auto it = in_use.find(p);
    if (it == in_use.end()) return;
    block b = it->second;
    in_use.erase(it);
    if (cudaEventRecord(b.done, 0) != cudaSuccess) {
        cudaGetLastError();
        cudaDeviceSynchronize();   /* no event to wait on: the queued copies are done now */
        cudaGetLastError();
    }
    try {
        free_blocks[b.cls].push_back(b);
    } catch (const std::bad_alloc &) {
        cudaEventSynchronize(b.done);
        cudaEventDestroy(b.done);
        cudaFreeHost(b.p);
        cudaGetLastError();
    }
}
