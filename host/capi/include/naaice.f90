! naaice: Fortran interfaces (ISO_C_BINDING) of the naaice-rs C library's middleware API,
! naaice_ap2.h (libnaaice_ap2). Compile this file with your program, then link the library:
!
!   gfortran $(pkg-config --variable=fortran_module naaice) app.f90 \
!       $(pkg-config --cflags --libs naaice) -o app
!
! Parameters are your own arrays, used in place (no copies): pass c_loc of the first element
! of a contiguous array or array section and its size in bytes (naa_param below does that
! for a c_loc and a size in bytes, integer(c_size_t) or a default integer). Integer return
! values: 0 success, -1 failure (then naa_last_error_message() says why); naa_finalize is a
! subroutine (call naa_finalize(h), or call naa_finalize(h, ierr) for its result). Handles,
! statuses and call arguments are the C structs.
! The library's documentation (docs/fortran.md, docs/c-api.md) describes every function.
module naaice
    use, intrinsic :: iso_c_binding
    implicit none
    private :: naa_param_size, naa_param_int

    ! A parameter over nbytes bytes at addr (c_loc of a contiguous array or section's first
    ! element): naa_param(addr, nbytes[, single_send]). nbytes is an integer(c_size_t), for
    ! sizes above 2 GiB (int(size(section), c_size_t) * c_sizeof(section(1))), or a default
    ! integer.
    interface naa_param
        module procedure naa_param_size, naa_param_int
    end interface naa_param

    ! Return codes of the NAA (naa_status%naa_error, up to 24 bits): 0x10-0x7F and above are
    ! the application's own.
    integer(c_int), parameter :: NAA_SUCCESS = 0, SOCKET_UNAVAIL = 1, KERNEL_TIMEOUT = 2, &
        KERNEL_FAILED = 3
    ! naa_waitany/naa_testany index when no handle has an RPC in flight.
    integer(c_int), parameter :: NAA_UNDEFINED = -1
    ! naa_status%state values.
    integer(c_int), parameter :: NAA_STATE_MRSP_DONE = 12, NAA_STATE_DATA_SENDING = 20, &
        NAA_STATE_DATA_RECEIVING = 22, NAA_STATE_FINISHED = 30, NAA_STATE_ERROR = 40, &
        NAA_STATE_DISCONNECTED = 3
    ! naa_last_error_kind() values.
    integer(c_int), parameter :: NAA_ERRKIND_NONE = 0, NAA_ERRKIND_ARGUMENT = 1, &
        NAA_ERRKIND_STATE = 2, NAA_ERRKIND_CONFIG = 3, NAA_ERRKIND_TRANSPORT = 4, &
        NAA_ERRKIND_PROTOCOL = 5, NAA_ERRKIND_TIMEOUT = 6, NAA_ERRKIND_INTERNAL = 7
    ! naa_swnaa_region%flags bits.
    integer(c_int8_t), parameter :: NAA_REGION_INTERNAL = 1, NAA_REGION_SINGLESEND = 2, &
        NAA_REGION_INPUT = 4, NAA_REGION_OUTPUT = 8

    ! One parameter: size bytes at addr (naa_param_t).
    type, bind(c) :: naa_param_t
        type(c_ptr) :: addr = c_null_ptr
        integer(c_size_t) :: size = 0
        logical(c_bool) :: single_send = .false.
    end type naa_param_t

    ! A connection to an NAA prepared for one function (naa_handle), filled by naa_create.
    type, bind(c) :: naa_handle
        integer(c_int) :: function_code = 0  ! unsigned int in C
        type(c_ptr) :: comm_ctx = c_null_ptr
    end type naa_handle

    ! Status of the last RPC (naa_status).
    type, bind(c) :: naa_status
        integer(c_int) :: state = 0
        integer(c_int) :: naa_error = 0  ! the 24-bit return code
        integer(c_int64_t) :: bytes_received = 0
    end type naa_status

    ! Per-call arguments (naa_call_args): function code, user bytes, deadline (0: default).
    type, bind(c) :: naa_call_args
        integer(c_int) :: function_code = 0
        integer(c_int8_t) :: user_bytes(3) = 0
        integer(c_int64_t) :: timeout_ms = 0
    end type naa_call_args

    ! What a kernel runs for (naa_swnaa_call).
    type, bind(c) :: naa_swnaa_call
        integer(c_int8_t) :: fncode
        integer(c_int8_t) :: user_bytes(3)
        integer(c_int32_t) :: rpc
    end type naa_swnaa_call

    ! One region as a kernel sees it (naa_swnaa_region).
    type, bind(c) :: naa_swnaa_region
        type(c_ptr) :: addr
        integer(c_size_t) :: size
        integer(c_int8_t) :: flags
    end type naa_swnaa_region

    interface
        ! Connects to the NAA for function_code (from NAA_SPEC) and registers the parameters.
        integer(c_int) function naa_create(function_code, input_params, input_amount, &
                output_params, output_amount, handle) bind(c, name="naa_create")
            import :: c_int, naa_param_t, naa_handle
            integer(c_int), value :: function_code
            type(naa_param_t), intent(in) :: input_params(*)
            integer(c_int), value :: input_amount
            type(naa_param_t), intent(in) :: output_params(*)
            integer(c_int), value :: output_amount
            type(naa_handle), intent(out) :: handle
        end function naa_create

        ! Starts one RPC and returns at once.
        integer(c_int) function naa_invoke(handle) bind(c, name="naa_invoke")
            import :: c_int, naa_handle
            type(naa_handle), intent(inout) :: handle
        end function naa_invoke

        ! Starts one RPC with per-call arguments.
        integer(c_int) function naa_invoke_with(handle, args) bind(c, name="naa_invoke_with")
            import :: c_int, naa_handle, naa_call_args
            type(naa_handle), intent(inout) :: handle
            type(naa_call_args), intent(in) :: args
        end function naa_invoke_with

        ! Starts one RPC with its own deadline in milliseconds.
        integer(c_int) function naa_invoke_timeout(handle, timeout_ms) &
                bind(c, name="naa_invoke_timeout")
            import :: c_int, c_int64_t, naa_handle
            type(naa_handle), intent(inout) :: handle
            integer(c_int64_t), value :: timeout_ms
        end function naa_invoke_timeout

        ! Progresses without blocking; flag is true once the RPC finished (status filled).
        integer(c_int) function naa_test(handle, flag, status) bind(c, name="naa_test")
            import :: c_int, c_bool, naa_handle, naa_status
            type(naa_handle), intent(inout) :: handle
            logical(c_bool), intent(out) :: flag
            type(naa_status), intent(out) :: status
        end function naa_test

        ! Blocks until the RPC finished.
        integer(c_int) function naa_wait(handle, status) bind(c, name="naa_wait")
            import :: c_int, naa_handle, naa_status
            type(naa_handle), intent(inout) :: handle
            type(naa_status), intent(out) :: status
        end function naa_wait

        ! Abandons the RPC in flight; the next invoke reconnects.
        integer(c_int) function naa_cancel(handle) bind(c, name="naa_cancel")
            import :: c_int, naa_handle
            type(naa_handle), intent(inout) :: handle
        end function naa_cancel

        ! The last RPC's full 24-bit return code.
        integer(c_int) function naa_get_return_code(handle, code) &
                bind(c, name="naa_get_return_code")
            import :: c_int, c_int32_t, naa_handle
            type(naa_handle), intent(inout) :: handle
            integer(c_int32_t), intent(out) :: code
        end function naa_get_return_code

        ! naa_finalize of the C library (the module's subroutine naa_finalize calls it).
        integer(c_int) function naa_finalize_c(handle) bind(c, name="naa_finalize")
            import :: c_int, naa_handle
            type(naa_handle), intent(inout) :: handle
        end function naa_finalize_c

        ! Blocks until one of count handles finished: index is 0-based (or NAA_UNDEFINED).
        integer(c_int) function naa_waitany(count, handles, index, status) &
                bind(c, name="naa_waitany")
            import :: c_int, naa_handle, naa_status
            integer(c_int), value :: count
            type(naa_handle), intent(inout) :: handles(*)
            integer(c_int), intent(out) :: index
            type(naa_status), intent(out) :: status
        end function naa_waitany

        ! Without blocking: flag true if one finished (index 0-based).
        integer(c_int) function naa_testany(count, handles, index, flag, status) &
                bind(c, name="naa_testany")
            import :: c_int, c_bool, naa_handle, naa_status
            integer(c_int), value :: count
            type(naa_handle), intent(inout) :: handles(*)
            integer(c_int), intent(out) :: index
            logical(c_bool), intent(out) :: flag
            type(naa_status), intent(out) :: status
        end function naa_testany

        ! Blocks until none of count handles has an RPC in flight.
        integer(c_int) function naa_waitall(count, handles, statuses) &
                bind(c, name="naa_waitall")
            import :: c_int, naa_handle, naa_status
            integer(c_int), value :: count
            type(naa_handle), intent(inout) :: handles(*)
            type(naa_status), intent(inout) :: statuses(*)
        end function naa_waitall

        ! Without blocking: flag true once none is in flight (statuses filled).
        integer(c_int) function naa_testall(count, handles, flag, statuses) &
                bind(c, name="naa_testall")
            import :: c_int, c_bool, naa_handle, naa_status
            integer(c_int), value :: count
            type(naa_handle), intent(inout) :: handles(*)
            logical(c_bool), intent(out) :: flag
            type(naa_status), intent(inout) :: statuses(*)
        end function naa_testall

        ! Registers a kernel of local mode (NAA_SPEC=local:FN:N): a bind(c) function
        ! integer(c_int32_t) kernel(user_data, call, regions, n_regions), passed as c_funloc.
        integer(c_int) function naa_local_register_kernel(fncode, kernel, user_data) &
                bind(c, name="naa_local_register_kernel")
            import :: c_int, c_funptr, c_ptr
            integer(c_int), value :: fncode
            type(c_funptr), value :: kernel
            type(c_ptr), value :: user_data
        end function naa_local_register_kernel

        ! Removes a kernel of local mode.
        integer(c_int) function naa_local_remove_kernel(fncode) &
                bind(c, name="naa_local_remove_kernel")
            import :: c_int
            integer(c_int), value :: fncode
        end function naa_local_remove_kernel

        ! A software NAA in this program (naa_swnaa_*): new, register kernels, start, stop.
        type(c_ptr) function naa_swnaa_new() bind(c, name="naa_swnaa_new")
            import :: c_ptr
        end function naa_swnaa_new

        integer(c_int) function naa_swnaa_register_kernel(naa, fncode, kernel, user_data) &
                bind(c, name="naa_swnaa_register_kernel")
            import :: c_int, c_ptr, c_funptr
            type(c_ptr), value :: naa
            integer(c_int), value :: fncode
            type(c_funptr), value :: kernel
            type(c_ptr), value :: user_data
        end function naa_swnaa_register_kernel

        ! address: a C string (trim(host)//c_null_char); port: 0 for a free one (ports above
        ! 32767 as their negative 16-bit value).
        integer(c_int) function naa_swnaa_start(naa, address, port) &
                bind(c, name="naa_swnaa_start")
            import :: c_int, c_ptr, c_char, c_int16_t
            type(c_ptr), value :: naa
            character(kind=c_char), intent(in) :: address(*)
            integer(c_int16_t), value :: port
        end function naa_swnaa_start

        ! The port it listens on (or -1).
        integer(c_int) function naa_swnaa_port(naa) bind(c, name="naa_swnaa_port")
            import :: c_int, c_ptr
            type(c_ptr), value :: naa
        end function naa_swnaa_port

        integer(c_int) function naa_swnaa_stop(naa) bind(c, name="naa_swnaa_stop")
            import :: c_int, c_ptr
            type(c_ptr), value :: naa
        end function naa_swnaa_stop

        integer(c_int) function naa_swnaa_destroy(naa) bind(c, name="naa_swnaa_destroy")
            import :: c_int, c_ptr
            type(c_ptr), value :: naa
        end function naa_swnaa_destroy

        ! Why this thread's last failing call failed (a C string; naa_last_error_message
        ! gives it as a Fortran string), and its kind (NAA_ERRKIND_*).
        type(c_ptr) function naa_last_error() bind(c, name="naa_last_error")
            import :: c_ptr
        end function naa_last_error

        integer(c_int) function naa_last_error_kind() bind(c, name="naa_last_error_kind")
            import :: c_int
        end function naa_last_error_kind
    end interface

    ! The C library's strlen, for naa_last_error_message.
    interface
        integer(c_size_t) function naa_c_strlen(s) bind(c, name="strlen")
            import :: c_size_t, c_ptr
            type(c_ptr), value :: s
        end function naa_c_strlen
    end interface

contains

    ! naa_param with the size as an integer(c_size_t): any size.
    function naa_param_size(addr, nbytes, single_send) result(p)
        type(c_ptr), intent(in) :: addr
        integer(c_size_t), intent(in) :: nbytes
        logical, intent(in), optional :: single_send
        type(naa_param_t) :: p
        p%addr = addr
        p%size = nbytes
        p%single_send = .false.
        if (present(single_send)) p%single_send = logical(single_send, c_bool)
    end function naa_param_size

    ! naa_param with the size as a default integer (as before; below 2 GiB).
    function naa_param_int(addr, nbytes, single_send) result(p)
        type(c_ptr), intent(in) :: addr
        integer(c_int), intent(in) :: nbytes
        logical, intent(in), optional :: single_send
        type(naa_param_t) :: p
        p = naa_param_size(addr, int(nbytes, c_size_t), single_send)
    end function naa_param_int

    ! Disconnects and releases the handle: call naa_finalize(h). ierr, if given, is the C
    ! function's result (0, or -1 for a handle that is not one).
    subroutine naa_finalize(handle, ierr)
        type(naa_handle), intent(inout) :: handle
        integer(c_int), intent(out), optional :: ierr
        integer(c_int) :: rc
        rc = naa_finalize_c(handle)
        if (present(ierr)) ierr = rc
    end subroutine naa_finalize

    ! naa_last_error() as a Fortran string ("" when the last call succeeded).
    function naa_last_error_message() result(msg)
        character(len=:), allocatable :: msg
        type(c_ptr) :: p
        character(kind=c_char), pointer :: chars(:)
        integer :: n, i
        p = naa_last_error()
        if (.not. c_associated(p)) then
            msg = ""
            return
        end if
        n = int(naa_c_strlen(p))
        call c_f_pointer(p, chars, [n])
        allocate(character(len=n) :: msg)
        do i = 1, n
            msg(i:i) = chars(i)
        end do
    end function naa_last_error_message

end module naaice
