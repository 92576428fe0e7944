! Every MPI rank offloads a section of its array in place to an NAA chosen by rank from
! NAA_SPEC (rank r takes entry r mod count, failing over), then rank 0 sums the wrong bytes.
!
!   mpif90 $(pkg-config --variable=fortran_module naaice) mpi_offload.f90 \
!       $(pkg-config --cflags --libs naaice) -o mpi_offload
!   mpirun -np 4 -x NAA_SPEC=127.0.0.1:23456:1:1,127.0.0.1:23457:1:1 ./mpi_offload
program mpi_offload
    use, intrinsic :: iso_c_binding
    use mpi
    use naaice
    implicit none

    integer(c_int8_t), target :: x(4096)
    type(naa_param_t) :: p(1)
    type(naa_handle) :: h
    type(naa_status) :: st
    integer :: rank, nranks, ierr, i, wrong, total, rc
    integer, parameter :: lo = 1025, hi = 3072, rounds = 4

    call mpi_init(ierr)
    call mpi_comm_rank(mpi_comm_world, rank, ierr)
    call mpi_comm_size(mpi_comm_world, nranks, ierr)
    x = int(mod(rank, 100), c_int8_t)
    p(1) = naa_param(c_loc(x(lo)), size(x(lo:hi)) * int(c_sizeof(x(1))))
    rc = naa_create(1, p, 1, p, 1, h)
    if (rc /= 0) then
        print '(a, i0, a, a)', "rank ", rank, ": naa_create: ", naa_last_error_message()
        call mpi_abort(mpi_comm_world, 1, ierr)
    end if
    do i = 1, rounds
        if (naa_invoke(h) /= 0 .or. naa_wait(h, st) /= 0 .or. st%naa_error /= NAA_SUCCESS) then
            print '(a, i0, a, a)', "rank ", rank, ": RPC failed: ", naa_last_error_message()
            call mpi_abort(mpi_comm_world, 1, ierr)
        end if
    end do
    call naa_finalize(h)
    wrong = 0
    do i = 1, size(x)
        if (i >= lo .and. i <= hi) then
            if (x(i) /= int(mod(rank, 100) + rounds, c_int8_t)) wrong = wrong + 1
        else
            if (x(i) /= int(mod(rank, 100), c_int8_t)) wrong = wrong + 1
        end if
    end do
    call mpi_reduce(wrong, total, 1, mpi_integer, mpi_sum, 0, mpi_comm_world, ierr)
    if (rank == 0) then
        print '(a, i0, a, i0, a)', "mpi_offload (Fortran): ", nranks, " ranks, ", total, &
            " wrong bytes"
    end if
    call mpi_finalize(ierr)
    if (rank == 0 .and. total /= 0) stop 1
end program mpi_offload
