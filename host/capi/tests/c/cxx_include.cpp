// The header also serves C++ programs (extern "C", the reference's names and layouts).
#include <naaice_ap2.h>

#include <cstdio>
#include <type_traits>

static_assert(sizeof(naa_param_t) == 24 && sizeof(naa_handle) == 16 && sizeof(naa_status) == 16,
              "layouts");
static_assert(std::is_same<decltype(naa_status::naa_error), naa_error>::value, "naa_error field");

int main() {
    naa_handle h{};
    naa_status st{};
    // Finalizing a never-created (zeroed) handle is a harmless no-op.
    int rc = naa_finalize(&h);
    std::printf("C++: naa_finalize on a zeroed handle returned %d, state %d\n", rc, (int)st.state);
    return (rc == 0 && st.state == INIT) ? 0 : 1;
}
