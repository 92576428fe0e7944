/*
 * naaice_ap2_cpp.h: the C++20 interface of naaice-rs, header-only, over the middleware API of
 * naaice_ap2.h; a drop-in replacement for the C reference's naaice_ap2_cpp.h (class
 * NAAHandler and the concepts Arithmetic, Vector, ArithmeticVector with the alias as_vector,
 * under the same names and with the same usage).
 *
 * Written by hand (not generated); link with libnaaice_ap2 (CMake: naaice::naaice or
 * naaice::naaice_static; pkg-config: naaice) and compile with -std=c++20 or later.
 *
 *   NAAHandler vadd(10);                        // function code 10
 *   std::vector<int32_t> a(n), b(n);
 *   auto sum = vadd.invoke<int32_t, N>(a, b);   // std::future<std::vector<int32_t>> of N
 *   std::vector<int32_t> c = sum.get();         // throws naaice::Error on failure
 *
 * Each invoke is one RPC of the handler's function code: the arguments (std::vector of
 * arithmetic elements, or arithmetic scalars) are the inputs in order, one output region of
 * outputSize elements of outputT is the result. The NAA is chosen from NAA_SPEC like
 * naa_create does (an entry with the function code and as many parameters as inputs).
 *
 * Reference names left out: none (host/capi/tests/reference_names.txt lists the reference's
 * public names; the test tests/reference_names checks them). The reference's header includes
 * a file "naaice_ap2.tpp" its repository does not have; its private members are not part of
 * this interface.
 */
#ifndef NAAICE_AP2_H
#define NAAICE_AP2_H

#include "naaice_ap2.h"

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <future>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

/* An integral or floating-point type: what a scalar argument or a vector's element may be. */
template <typename T>
concept Arithmetic = std::integral<T> || std::floating_point<T>;

/* The std::vector type with T's element and allocator types (T itself if T is one). */
template <typename T>
using as_vector = std::vector<typename T::value_type, typename T::allocator_type>;

/* A std::vector (of any element and allocator type). */
template <typename T>
concept Vector = std::same_as<T, as_vector<T>>;

/* A std::vector of arithmetic elements: what a vector argument may be. */
template <typename T>
concept ArithmeticVector = Vector<T> && Arithmetic<typename T::value_type>;

namespace naaice {

/*
 * The failure of an NAAHandler call, carried by the std::future its invoke returns: the
 * library's reason (naa_last_error() of the failing call, prefixed with the call), its kind
 * (NAA_ERRKIND_NONE when the NAA itself answered with an error code), and the NAA's return
 * code (0 unless the NAA answered with an error: SOCKET_UNAVAIL, KERNEL_TIMEOUT or an
 * application code).
 */
class Error : public std::runtime_error {
public:
    /* An error with message `what`, kind `kind` and NAA return code `naa_code`. */
    Error(const std::string &what, naa_error_kind kind, std::uint32_t naa_code = 0)
        : std::runtime_error(what), kind_(kind), naa_code_(naa_code) {}

    /* What kind of failure it was (naa_last_error_kind() of the failing call). */
    naa_error_kind kind() const noexcept { return kind_; }

    /* The NAA's return code if the NAA answered with an error, else 0. */
    std::uint32_t naa_code() const noexcept { return naa_code_; }

private:
    naa_error_kind kind_;
    std::uint32_t naa_code_;
};

namespace detail {

/* The bytes of one input argument. */
struct Bytes {
    const void *data;
    std::size_t size;
};

/* A scalar argument's bytes. */
template <typename T>
    requires Arithmetic<std::remove_cvref_t<T>>
Bytes bytes_of(const T &value) {
    return {&value, sizeof value};
}

/* A vector argument's bytes. */
template <typename T>
    requires ArithmeticVector<std::remove_cvref_t<T>>
Bytes bytes_of(const T &values) {
    using Element = typename std::remove_cvref_t<T>::value_type;
    static_assert(!std::same_as<Element, bool>,
                  "std::vector<bool> has no contiguous storage: pass std::vector<std::uint8_t>");
    return {values.data(), values.size() * sizeof(Element)};
}

/* An owned, fixed-size byte buffer the library may hold on to between RPCs. */
struct Buffer {
    std::unique_ptr<unsigned char[]> data;
    std::size_t size = 0;
};

/* An Error from the last failure of the calling thread, for the call `call`. */
inline Error last_error(const char *call) {
    return Error(std::string(call) + ": " + naa_last_error(), naa_last_error_kind());
}

/* Sets a promise when it goes out of scope (also when an exception leaves the scope). */
class Signal {
public:
    explicit Signal(std::shared_ptr<std::promise<void>> done) : done_(std::move(done)) {}
    Signal(const Signal &) = delete;
    Signal &operator=(const Signal &) = delete;
    ~Signal() {
        try {
            done_->set_value();
        } catch (...) {
        }
    }

private:
    std::shared_ptr<std::promise<void>> done_;
};

} // namespace detail
} // namespace naaice

/*
 * Offloads RPCs of one function code to an NAA, through the C middleware API (naa_create,
 * naa_invoke, naa_wait, naa_finalize of naaice_ap2.h).
 *
 * The first invoke connects (naa_create); later invokes with the same sizes reuse the
 * connection, invokes with other sizes reconnect. The arguments are copied into buffers the
 * handler owns before invoke returns, so they may change or go away at once; the RPC runs
 * on a thread of its own and its result is read through the returned std::future. One RPC
 * runs at a time: an invoke while the previous RPC is in flight waits for it (its result
 * stays in its own future). A failed connection (connection lost, deadline passed) is closed,
 * and the next invoke connects again.
 *
 * The destructor waits for the RPC in flight and disconnects (naa_finalize). A handler is
 * neither copied nor moved. Its member functions may be called from several threads. As
 * with any std::future from std::async, destroying the future without get() waits for the
 * RPC.
 */
class NAAHandler {
public:
    /* A handler for function code `fncode` (1-127; checked by the first invoke). It does not
     * connect yet. */
    NAAHandler(std::size_t fncode) : fncode_(checked_code(fncode)) {}

    /* Waits for the RPC in flight, then disconnects (naa_finalize). */
    ~NAAHandler() {
        try {
            std::lock_guard<std::mutex> lock(mutex_);
            wait_idle();
            naa_finalize(&handle_);
        } catch (...) {
        }
    }

    NAAHandler(const NAAHandler &) = delete;
    NAAHandler &operator=(const NAAHandler &) = delete;

    /*
     * Starts one RPC with `args` as its inputs, in order (each a std::vector of arithmetic
     * elements, not empty, or an arithmetic scalar), and one output of `outputSize` elements
     * of `outputT`. Returns at once (after the previous RPC finished); the future gives the
     * output once the NAA answered, or throws naaice::Error: connecting failed (no NAA_SPEC
     * entry, NAA unreachable), the RPC failed (connection lost, deadline passed), or the NAA
     * answered with an error code (Error::naa_code()). Throws std::invalid_argument at once
     * for an empty vector.
     */
    template <typename outputT, std::size_t outputSize, typename... inputTs>
        requires((ArithmeticVector<std::remove_cvref_t<inputTs>> ||
                  Arithmetic<std::remove_cvref_t<inputTs>>) &&
                 ...)
    std::future<std::vector<outputT>> invoke(inputTs &&...args) {
        static_assert(outputSize > 0, "the output needs at least one element");
        static_assert(std::is_trivially_copyable_v<outputT>, "the output is copied as bytes");
        const std::vector<naaice::detail::Bytes> inputs{naaice::detail::bytes_of(args)...};
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            if (inputs[i].size == 0) {
                throw std::invalid_argument("NAAHandler::invoke: input " + std::to_string(i) +
                                            " is empty");
            }
        }
        std::lock_guard<std::mutex> lock(mutex_);
        wait_idle();
        stage(inputs, outputSize * sizeof(outputT));
        auto done = std::make_shared<std::promise<void>>();
        idle_ = done->get_future().share();
        try {
            return std::async(std::launch::async, [this, done]() {
                naaice::detail::Signal idle(done);
                run();
                std::vector<outputT> result(outputSize);
                std::memcpy(result.data(), output_.data.get(), output_.size);
                return result;
            });
        } catch (...) {
            done->set_value();
            throw;
        }
    }

    /* The function code of this handler's RPCs. */
    naa_function_code_t function_code() const noexcept { return fncode_; }

private:
    static naa_function_code_t checked_code(std::size_t fncode) {
        if (fncode > std::numeric_limits<naa_function_code_t>::max()) {
            throw std::invalid_argument("NAAHandler: function code " + std::to_string(fncode) +
                                        " is out of range");
        }
        return static_cast<naa_function_code_t>(fncode);
    }

    /* Waits until no RPC task uses the buffers and the handle (mutex_ held). */
    void wait_idle() {
        if (idle_.valid()) {
            idle_.wait();
        }
    }

    /* Copies the inputs into the buffers (mutex_ held, no RPC task running); with other
     * sizes than the connection's, disconnects first and allocates new buffers. */
    void stage(const std::vector<naaice::detail::Bytes> &inputs, std::size_t output_bytes) {
        bool same = inputs.size() == inputs_.size() && output_bytes == output_.size;
        for (std::size_t i = 0; same && i < inputs.size(); ++i) {
            same = inputs[i].size == inputs_[i].size;
        }
        if (!same) {
            // The library holds the old buffers until naa_finalize.
            naa_finalize(&handle_);
            inputs_.clear();
            for (const auto &in : inputs) {
                inputs_.push_back({std::make_unique<unsigned char[]>(in.size), in.size});
            }
            output_ = {std::make_unique<unsigned char[]>(output_bytes), output_bytes};
        }
        for (std::size_t i = 0; i < inputs.size(); ++i) {
            std::memcpy(inputs_[i].data.get(), inputs[i].data, inputs[i].size);
        }
    }

    /* Connects if needed, runs one RPC and waits for it (on the RPC's thread). */
    void run() {
        if (handle_.comm_ctx == nullptr) {
            std::vector<naa_param_t> in;
            for (auto &b : inputs_) {
                in.push_back({b.data.get(), b.size, false});
            }
            naa_param_t out{output_.data.get(), output_.size, false};
            if (naa_create(fncode_, in.data(), static_cast<unsigned int>(in.size()), &out, 1,
                           &handle_) != 0) {
                throw naaice::detail::last_error("naa_create");
            }
        }
        naa_status status{};
        if (naa_invoke(&handle_) != 0) {
            fail("naa_invoke");
        }
        if (naa_wait(&handle_, &status) != 0) {
            fail("naa_wait");
        }
        // The field may hold application codes beyond the enumerators, which C++ must not
        // read as the enum type: read its bytes.
        std::underlying_type_t<naa_error> raw;
        static_assert(sizeof raw == sizeof status.naa_error);
        std::memcpy(&raw, &status.naa_error, sizeof raw);
        const auto code = static_cast<std::uint32_t>(raw);
        if (code != 0) {
            throw naaice::Error("NAA function code " + std::to_string(fncode_) +
                                    " answered with error code " + std::to_string(code),
                                NAA_ERRKIND_NONE, code);
        }
    }

    /* Throws the failure of `call`, after closing the connection (the next invoke
     * reconnects). */
    [[noreturn]] void fail(const char *call) {
        naaice::Error error = naaice::detail::last_error(call);
        naa_finalize(&handle_);
        throw error;
    }

    naa_function_code_t fncode_;
    /* Zeroed until connected and after naa_finalize (naa_finalize on it is a no-op). */
    naa_handle handle_{};
    std::vector<naaice::detail::Buffer> inputs_;
    naaice::detail::Buffer output_;
    /* Guards invoke and the destructor; an RPC task runs without it, ordered by idle_. */
    std::mutex mutex_;
    /* Ready once the last RPC task no longer uses the buffers and the handle. */
    std::shared_future<void> idle_;
};

#endif /* NAAICE_AP2_H */
