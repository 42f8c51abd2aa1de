// Wrap a buffer in a stridex View, export it over DLPack, import it back and read through it.
#include <cstdio>
#include <vector>

#include <stridex/dlpack.hpp>

int main() {
    std::vector<double> data{1, 2, 3, 4, 5, 6};
    const std::int64_t shape[] = {2, 3};
    stridex::View view(data.data(), 0, stridex::Layout::contiguous(shape), stridex::dtypes::float64,
                       stridex::Device::cpu(), false, stridex::Owner());

    stridex::View back = stridex::dlpack::import_managed(stridex::dlpack::export_versioned(view.transpose()));
    const double corner = back.as<const double, 2>()(2, 1);
    std::printf("%s %s view, element (2, 1) = %g\n", back.device().name().c_str(), back.dtype().name().c_str(), corner);
    return corner == 6.0 ? 0 : 1;
}
