// DLPack import + export round trips through a stridex View, ndim 1-4.
//
// One iteration: a producer's versioned tensor is imported (validated, owner created), the View is
// exported again and the consumer runs the exported deleter, which drops the owner and runs the
// producer's deleter. The "allocs/iter" counter counts every operator new in the loop: the goal is
// exactly one, the owner of the imported tensor.
#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "stridex/dlpack.hpp"

namespace {
std::atomic<long> g_allocations{0};
}

void* operator new(std::size_t size) {
    g_allocations.fetch_add(1, std::memory_order_relaxed);
    if (void* p = std::malloc(size ? size : 1)) return p;
    throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace {

using namespace stridex;

// A producer whose tensor lives on the stack and whose deleter only counts.
struct StackProducer {
    dlpack::DLManagedTensorVersioned tensor{};
    std::int64_t shape[4] = {8, 16, 32, 64};
    std::int64_t strides[4] = {};
    long deleted = 0;
    alignas(64) float data[16];

    explicit StackProducer(int ndim) {
        std::int64_t stride = 1;
        for (int a = ndim - 1; a >= 0; --a) {
            strides[a] = stride;
            stride *= shape[a];
        }
        tensor.version = {1, 3};
        tensor.manager_ctx = this;
        tensor.deleter = [](dlpack::DLManagedTensorVersioned* t) {
            ++static_cast<StackProducer*>(t->manager_ctx)->deleted;
        };
        tensor.dl_tensor = {data, {1, 0}, ndim, {2, 32, 1}, shape, strides, 0};
    }
};

void RoundTrip(benchmark::State& state) {
    StackProducer producer(static_cast<int>(state.range(0)));
    long allocations = 0;
    for (auto _ : state) {
        const long before = g_allocations.load(std::memory_order_relaxed);
        dlpack::DLManagedTensorVersioned* exported;
        {
            const View view = dlpack::import_managed(&producer.tensor);
            exported = dlpack::export_versioned(view);
        }
        benchmark::DoNotOptimize(exported);
        exported->deleter(exported);
        allocations += g_allocations.load(std::memory_order_relaxed) - before;
    }
    if (producer.deleted != static_cast<long>(state.iterations())) state.SkipWithError("deleter count mismatch");
    state.counters["allocs/iter"] = static_cast<double>(allocations) / static_cast<double>(state.iterations());
}
BENCHMARK(RoundTrip)->DenseRange(1, 4);

void ImportOnly(benchmark::State& state) {
    StackProducer producer(static_cast<int>(state.range(0)));
    for (auto _ : state) {
        View view = dlpack::import_managed(&producer.tensor);
        benchmark::DoNotOptimize(view.ptr());
    }
}
BENCHMARK(ImportOnly)->DenseRange(1, 4);

void ExportOnly(benchmark::State& state) {
    const std::int64_t shape[] = {8, 16, 32, 64};
    float data[1];
    View view(data, 0, Layout::contiguous(std::span(shape, static_cast<std::size_t>(state.range(0)))), dtypes::float32,
              Device::cpu(), false, Owner::from_action([]() noexcept {}));
    for (auto _ : state) {
        auto* exported = dlpack::export_versioned(view);
        benchmark::DoNotOptimize(exported);
        exported->deleter(exported);
    }
}
BENCHMARK(ExportOnly)->DenseRange(1, 4);

}  // namespace

BENCHMARK_MAIN();
