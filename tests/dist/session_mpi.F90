! The Fortran binding data parallel: under mpirun -np 2 every rank puts MPI_COMM_WORLD (its
! Fortran handle, the integer of `use mpi`) into the config's "session": {"mpi_comm": ...},
! pushes columns of its own and trains; the ranks' models must end identical (their
! predictions of one probe set agree bit for bit), which they would not without the averaged
! gradients (each rank's data differ).
program session_mpi
  use, intrinsic :: iso_c_binding, only: c_float
  use, intrinsic :: iso_fortran_env, only: int64, error_unit
  use brisk
  use mpi
  implicit none
  integer, parameter :: nin = 16, nout = 4, n = 256, probe = 8
  type(brisk_session) :: s
  real(c_float) :: x(nin, n), y(nout, n), px(nin, probe), mine(nout, probe), other(nout, probe)
  character(len=512) :: config
  integer :: rank, ierr, i, j, st, bad, bad_any
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  write (config, '(a, i0, a)') '{"model": {"type": "mlp", "inputs": 16, "hidden": [32], "outputs": 4, "task": "regress"}, ' // &
       '"data": {"validation_fraction": 0}, "train": {"batch_size": 32, "seed": 5}, ' // &
       '"speed": {"threads": 1, "prefetch": 0}, "session": {"mpi_comm": ', MPI_COMM_WORLD, '}}'
  st = brisk_create(s, trim(config))
  if (st /= BRISK_OK) call fail('create: ' // brisk_error_message(s))
  do j = 1, n  ! this rank's own columns
     do i = 1, nin
        x(i, j) = sin(real(i * j + 97 * rank, c_float))
     end do
     do i = 1, nout
        y(i, j) = cos(real(i + j + 13 * rank, c_float))
     end do
  end do
  do j = 1, probe
     do i = 1, nin
        px(i, j) = real(mod(i + j, 7), c_float) / 7.0 - 0.5
     end do
  end do
  if (brisk_push(s, x, y) /= BRISK_OK) call fail('push: ' // brisk_error_message(s))
  if (brisk_train_steps(s, 12_int64) /= BRISK_OK) call fail('train: ' // brisk_error_message(s))
  if (brisk_predict(s, px, mine) /= BRISK_OK) call fail('predict: ' // brisk_error_message(s))
  call MPI_Sendrecv(mine, nout * probe, MPI_REAL, 1 - rank, 0, other, nout * probe, MPI_REAL, 1 - rank, 0, &
                    MPI_COMM_WORLD, MPI_STATUS_IGNORE, ierr)
  bad = 0
  if (any(mine /= other)) bad = 1
  call MPI_Allreduce(bad, bad_any, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  st = brisk_destroy(s)
  if (rank == 0 .and. bad_any == 0) print '(a)', 'PASS: the ranks hold one model'
  if (rank == 0 .and. bad_any /= 0) print '(a)', 'FAIL: the ranks'' models differ'
  call MPI_Finalize(ierr)
  if (bad_any /= 0) error stop 1
contains
  subroutine fail(msg)
    character(len=*), intent(in) :: msg
    write (error_unit, '(a, i0, a, a)') 'rank ', rank, ': ', msg
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
  end subroutine fail
end program session_mpi
