! Offloads an array section in place and checks it, with the naaice Fortran module.
!
! Part 1: bytes x(101:356) of an int8 array go to the NAA serving function 1 (the built-in
!   kernel of every software NAA and of local mode: adds 1 to every byte); the NAA writes the
!   results back into the section itself. Elements outside the section must stay unchanged.
! Part 2: a kernel written in Fortran, registered for local mode as function 20, doubles
!   the float64 section y(11:60) in place (an NAA_SPEC entry local:20:1 selects it).
!
!   NAA_SPEC=local:1:1,local:20:1 ./offload          # both parts in this process
!   NAA_SPEC=127.0.0.1:23456:1:1,local:20:1 ./offload  # part 1 on a naaice-swnaa
! The kernel, in a module: a kernel must not be an internal procedure (c_funloc of one needs
! an executable stack for its trampoline).
module offload_kernels
    use, intrinsic :: iso_c_binding
    use naaice
    implicit none
contains

    ! The kernel: doubles every float64 of its first region (in place).
    integer(c_int32_t) function double_it(user_data, call, regions, n_regions) bind(c)
        type(c_ptr), value :: user_data
        type(naa_swnaa_call), intent(in) :: call
        integer(c_size_t), value :: n_regions
        type(naa_swnaa_region), intent(inout) :: regions(n_regions)
        real(c_double), pointer :: v(:)
        call c_f_pointer(regions(1)%addr, v, [regions(1)%size / c_sizeof(1.0_c_double)])
        v = 2 * v
        double_it = 0
    end function double_it

end module offload_kernels

program offload
    use, intrinsic :: iso_c_binding
    use naaice
    use offload_kernels
    implicit none

    integer(c_int8_t), target :: x(1000)
    real(c_double), target :: y(100)
    type(naa_param_t) :: p(1)
    type(naa_handle) :: h
    type(naa_status) :: st
    integer :: i, wrong, rounds
    integer(c_int) :: rc

    do i = 1, size(x)
        x(i) = int(mod(i, 100), c_int8_t)
    end do
    rounds = 3
    p(1) = naa_param(c_loc(x(101)), size(x(101:356)) * int(c_sizeof(x(1))))
    call check(naa_create(1, p, 1, p, 1, h), "naa_create (function 1)")
    do i = 1, rounds
        call check(naa_invoke(h), "naa_invoke")
        call check(naa_wait(h, st), "naa_wait")
        if (st%naa_error /= NAA_SUCCESS) then
            print '(a, i0)', "offload: return code ", st%naa_error
            stop 1
        end if
    end do
    call naa_finalize(h, rc)
    call check(rc, "naa_finalize")
    wrong = 0
    do i = 1, size(x)
        if (i >= 101 .and. i <= 356) then
            if (x(i) /= int(mod(i, 100) + rounds, c_int8_t)) wrong = wrong + 1
        else
            if (x(i) /= int(mod(i, 100), c_int8_t)) wrong = wrong + 1
        end if
    end do
    print '(a, i0, a, i0, a)', "offload: section x(101:356), ", rounds, " RPCs, ", wrong, &
        " wrong"

    ! Part 2: a Fortran kernel in local mode.
    call check(naa_local_register_kernel(20, c_funloc(double_it), c_null_ptr), &
        "naa_local_register_kernel")
    y = [(real(i, c_double), i = 1, size(y))]
    ! The size as an integer(c_size_t), the form for sections above 2 GiB.
    p(1) = naa_param(c_loc(y(11)), int(size(y(11:60)), c_size_t) * c_sizeof(y(1)))
    call check(naa_create(20, p, 1, p, 1, h), "naa_create (function 20)")
    call check(naa_invoke(h), "naa_invoke")
    call check(naa_wait(h, st), "naa_wait")
    call naa_finalize(h)
    ! A size above 2 GiB survives (only the descriptor: nothing is registered here).
    p(1) = naa_param(c_loc(y(1)), 3_c_size_t * 1073741824_c_size_t, single_send=.true.)
    if (p(1)%size /= 3221225472_c_size_t .or. .not. p(1)%single_send) then
        print '(a, i0)', "offload: naa_param of 3 GiB has size ", p(1)%size
        stop 1
    end if
    do i = 1, size(y)
        if (i >= 11 .and. i <= 60) then
            if (y(i) /= 2 * real(i, c_double)) wrong = wrong + 1
        else
            if (y(i) /= real(i, c_double)) wrong = wrong + 1
        end if
    end do
    print '(a, i0, a, i0, a)', "offload: Fortran kernel on y(11:60), return code ", &
        st%naa_error, ", ", wrong, " wrong in total"
    if (wrong /= 0 .or. st%naa_error /= NAA_SUCCESS) stop 1

contains

    subroutine check(rc, what)
        integer(c_int), intent(in) :: rc
        character(len=*), intent(in) :: what
        if (rc /= 0) then
            print '(a, a, a, a)', "offload: ", what, ": ", naa_last_error_message()
            stop 1
        end if
    end subroutine check

end program offload
