// NAAHandler (naaice_ap2_cpp.h) against the software NAA of tests/cpp_handler.rs: several
// invokes and their futures, inputs copied at invoke, queued and concurrent RPCs, a size
// change (reconnect), the error paths (exceptions with the library's reason and the NAA's
// return code) and the destructor with an RPC in flight. NAA_SPEC names the NAA: function
// codes 40 (axpy, four entries), 41 (sum), 42 (always answers 0x42), 43 (no kernel); none for 44.
#include <naaice_ap2_cpp.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

// The reference's concepts and alias, under its names.
static_assert(Arithmetic<int> && Arithmetic<double> && !Arithmetic<std::string>);
static_assert(Vector<std::vector<int>> && !Vector<int> && !Vector<std::string>);
static_assert(ArithmeticVector<std::vector<float>> && !ArithmeticVector<std::vector<std::string>>);
static_assert(std::same_as<as_vector<std::vector<short>>, std::vector<short>>);

namespace {

int checks = 0;
int failures = 0;

void check(bool ok, const char *what, int line) {
    ++checks;
    if (!ok) {
        ++failures;
        std::fprintf(stderr, "handler.cpp:%d: check failed: %s\n", line, what);
    }
}

#define CHECK(cond) check((cond), #cond, __LINE__)

constexpr std::size_t N = 1000;

std::vector<double> iota(std::size_t n, double start) {
    std::vector<double> v(n);
    for (std::size_t i = 0; i < n; ++i) {
        v[i] = start + static_cast<double>(i);
    }
    return v;
}

bool is_axpy(const std::vector<double> &out, double a, const std::vector<double> &x,
             const std::vector<double> &y) {
    if (out.size() != x.size()) {
        return false;
    }
    for (std::size_t i = 0; i < x.size(); ++i) {
        if (out[i] != a * x[i] + y[i]) {
            return false;
        }
    }
    return true;
}

// The naaice::Error a future throws, or a default one if it throws none.
template <typename T>
naaice::Error error_of(std::future<T> &f) {
    try {
        f.get();
    } catch (const naaice::Error &e) {
        return e;
    }
    return naaice::Error("no exception", NAA_ERRKIND_NONE);
}

bool contains(const char *text, const char *part) {
    return std::string(text).find(part) != std::string::npos;
}

} // namespace

int main() {
    const double a = 2.5;
    std::vector<double> x = iota(N, 1.0);
    std::vector<double> y = iota(N, -100.0);
    const std::vector<double> x0 = x;

    NAAHandler axpy(40);
    CHECK(axpy.function_code() == 40);

    // One RPC; the inputs are copied at invoke, so changing x at once does not matter.
    auto first = axpy.invoke<double, N>(a, x, y);
    CHECK(first.valid());
    x.assign(N, -1.0);
    CHECK(is_axpy(first.get(), a, x0, y));
    CHECK(!first.valid());

    // Two RPCs queued on one handler: the second waits for the first; each result is its own.
    auto second = axpy.invoke<double, N>(a, x0, y);
    auto third = axpy.invoke<double, N>(a, x, y);
    CHECK(is_axpy(third.get(), a, x, y));
    CHECK(is_axpy(second.get(), a, x0, y));

    // Other sizes: the handler reconnects. A future can be polled.
    const std::vector<double> small_x = iota(7, 3.0);
    const std::vector<double> small_y = iota(7, 0.5);
    auto small = axpy.invoke<double, 7>(a, small_x, small_y);
    while (small.wait_for(std::chrono::milliseconds(1)) != std::future_status::ready) {
    }
    CHECK(is_axpy(small.get(), a, small_x, small_y));

    // Two handlers of one function code (two NAA_SPEC entries) run at the same time.
    {
        NAAHandler other(40);
        auto f1 = axpy.invoke<double, N>(a, x0, y);
        auto f2 = other.invoke<double, N>(1.0, y, x0);
        CHECK(is_axpy(f2.get(), 1.0, y, x0));
        CHECK(is_axpy(f1.get(), a, x0, y));
    }

    // Scalars of other types, temporaries, and 64-bit output.
    NAAHandler sum(41);
    std::vector<std::int32_t> values(100000);
    for (std::size_t i = 0; i < values.size(); ++i) {
        values[i] = static_cast<std::int32_t>(i % 1000) - 300;
    }
    std::int64_t expected = 0;
    for (auto v : values) {
        expected += v;
    }
    std::int32_t offset = -7;
    auto s1 = sum.invoke<std::int64_t, 1>(values, offset);
    auto s2 = sum.invoke<std::int64_t, 1>(values, std::int32_t{5});
    CHECK(s1.get() == std::vector<std::int64_t>{expected - 7});
    CHECK(s2.get() == std::vector<std::int64_t>{expected + 5});

    // The NAA answers with an application error code: naaice::Error carries it; the handler
    // stays usable.
    NAAHandler fails(42);
    std::vector<std::uint8_t> bytes(16, 1);
    for (int round = 0; round < 2; ++round) {
        auto f = fails.invoke<std::uint8_t, 16>(bytes);
        naaice::Error e = error_of(f);
        CHECK(e.naa_code() == 0x42 && e.kind() == NAA_ERRKIND_NONE);
        CHECK(contains(e.what(), "error code 66"));
    }

    // No kernel for the function code: SOCKET_UNAVAIL.
    NAAHandler unserved(43);
    auto unavailable = unserved.invoke<std::uint8_t, 16>(bytes);
    CHECK(error_of(unavailable).naa_code() == static_cast<std::uint32_t>(SOCKET_UNAVAIL));

    // No NAA for the function code: naa_create fails with the library's reason.
    NAAHandler nowhere(44);
    auto unconnected = nowhere.invoke<std::uint8_t, 16>(bytes);
    naaice::Error config = error_of(unconnected);
    CHECK(config.kind() == NAA_ERRKIND_CONFIG && config.naa_code() == 0);
    CHECK(contains(config.what(), "naa_create: ") &&
          contains(config.what(), "no free NAA_SPEC entry with function code 44"));

    // A function code the protocol cannot carry.
    NAAHandler too_big(200);
    auto refused = too_big.invoke<std::uint8_t, 16>(bytes);
    CHECK(error_of(refused).kind() == NAA_ERRKIND_ARGUMENT);

    // An empty input is refused at once.
    std::vector<double> empty;
    bool thrown = false;
    try {
        (void)axpy.invoke<double, 1>(a, empty, empty);
    } catch (const std::invalid_argument &) {
        thrown = true;
    }
    CHECK(thrown);

    // The handler may go away with an RPC in flight: its destructor waits for it, the future
    // keeps the result.
    std::future<std::vector<double>> outlives;
    {
        NAAHandler brief(40);
        outlives = brief.invoke<double, N>(a, x0, y);
    }
    CHECK(is_axpy(outlives.get(), a, x0, y));

    // Futures from several threads' handlers.
    std::vector<std::thread> threads;
    std::vector<int> correct(2, 0);
    for (int t = 0; t < 2; ++t) {
        threads.emplace_back([&, t] {
            NAAHandler own(40);
            for (int i = 0; i < 20; ++i) {
                auto f = own.invoke<double, N>(static_cast<double>(t + i), x0, y);
                correct[static_cast<std::size_t>(t)] +=
                    is_axpy(f.get(), static_cast<double>(t + i), x0, y) ? 1 : 0;
            }
        });
    }
    for (auto &t : threads) {
        t.join();
    }
    CHECK(correct[0] == 20 && correct[1] == 20);

    std::printf("cpp handler: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
