// Vector addition through the C++20 interface (naaice_ap2_cpp.h): c = a + b on 4096 32-bit
// integers, twice, on the NAA NAA_SPEC names for function code 10 with two inputs.
#include <naaice_ap2_cpp.h>

#include <cstdint>
#include <cstdio>
#include <vector>

int main() {
    constexpr std::size_t n = 4096;
    std::vector<std::int32_t> a(n), b(n);
    for (std::size_t i = 0; i < n; ++i) {
        a[i] = static_cast<std::int32_t>(i);
        b[i] = static_cast<std::int32_t>(7 * i) - 5000;
    }
    try {
        NAAHandler vector_add(10);
        for (int round = 1; round <= 2; ++round) {
            std::vector<std::int32_t> c = vector_add.invoke<std::int32_t, n>(a, b).get();
            for (std::size_t i = 0; i < n; ++i) {
                if (c[i] != a[i] + b[i]) {
                    std::printf("vector add (C++): element %zu wrong\n", i);
                    return 1;
                }
            }
            b.swap(a);
        }
    } catch (const naaice::Error &e) {
        std::fprintf(stderr, "vector add (C++): %s\n", e.what());
        return 1;
    }
    std::printf("vector add (C++): %zu elements correct, 2 RPCs\n", n);
    return 0;
}
