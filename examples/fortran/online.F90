! brisk inside a simulation, in Fortran (the C twin is examples/c/online.c): a toy model steps
! forward in time; every step each of its 80 columns yields a coarse field (7 values) and a
! fine field (256 values), pushed into a brisk session; every 48 steps (3840 samples) the
! diffusion denoiser trains for an epoch; at the end it samples fine fields from coarse ones.
! Given MODEL.onnx (a network exported from PyTorch, examples/onnx_denoiser.py: input
! "coarse" [7], output "fine_hat" [256]), the session trains that model instead, on the same
! samples with the clean fine field as its target, and the end predicts fine fields from coarse
! ones, which must then be closer to the truth than the coarse block values.
!
! Built twice: plain, and with -DBRISK_EXAMPLE_MPI as an MPI program where every rank computes
! its share of the columns and rank 0 gathers them, trains, samples and scatters the sampled
! fields back. brisk never calls MPI itself. Stops with a non-zero code when the loss did not
! decrease or the samples do not have the right shape and finite values.
!
!   online_f [CHECKPOINT_OUT [MODEL.onnx]]     mpirun -np 2 online_f_mpi [CHECKPOINT_OUT [MODEL.onnx]]
program online
  use, intrinsic :: iso_c_binding, only: c_float, c_double
  use, intrinsic :: iso_fortran_env, only: int64, error_unit
  use, intrinsic :: ieee_arithmetic, only: ieee_is_finite
  use brisk
#ifdef BRISK_EXAMPLE_MPI
  use mpi
#endif
  implicit none
  integer, parameter :: columns = 80, ncoarse = 7, nfine = 256, steps_per_epoch = 48, epochs = 4
  character(len=*), parameter :: config = &
       '{"model": {"type": "diffusion", "fine": 256, "coarse": 7, "hidden": [256, 256, 256],' // &
       '           "noise": {"steps": 50, "prediction": "x0"}},' // &
       ' "data":  {"validation_fraction": 0, "buffer": {"capacity": 3840, "when_full": "drop_oldest"}},' // &
       ' "train": {"batch_size": 16, "seed": 0, "log_every": 240},' // &
       ' "speed": {"device": "auto", "threads": 0}}'  ! threads 0: OMP_NUM_THREADS
  ! an imported model's config but its file: a regression of the clean field on the coarse one
  character(len=*), parameter :: onnx_rest = &
       '"inputs": [{"name": "coarse", "shape": [7]}, {"name": "fine", "shape": [256]}],' // &
       '           "losses": [{"output": "fine_hat", "target": "fine", "type": "mse"}]},' // &
       ' "data":  {"validation_fraction": 0, "buffer": {"capacity": 3840, "when_full": "drop_oldest"}},' // &
       ' "train": {"batch_size": 16, "seed": 0, "log_every": 240},' // &
       ' "speed": {"device": "auto", "threads": 0}}'
  character(len=:), allocatable :: session_config
  character(len=1024) :: onnx
  logical :: imported
  real(c_float) :: coarse(ncoarse, columns), fine(nfine, columns), sampled(nfine, columns), guess(nfine, columns)
  real(c_double) :: loss(epochs), se, sb
  type(brisk_session) :: s
  integer :: rank, ranks, nloc, first, j, k, e, bad, i
  integer(int64) :: in_w, tg_w
  character(len=256) :: ckpt
#ifdef BRISK_EXAMPLE_MPI
  integer :: ierr, any_bad
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, ranks, ierr)
  if (mod(columns, ranks) /= 0) then
     if (rank == 0) write (error_unit, '(a)') 'online: the columns do not split over the ranks'
     call MPI_Abort(MPI_COMM_WORLD, 2, ierr)
  end if
#else
  rank = 0
  ranks = 1
#endif
  nloc = columns / ranks
  first = rank * nloc + 1
  bad = 0
  loss = 0
  imported = command_argument_count() > 1
  if (imported) then  ! a path without quotes or backslashes: it goes into the JSON as it is
     call get_command_argument(2, onnx)
     session_config = '{"model": {"type": "onnx", "file": "' // trim(onnx) // '", ' // onnx_rest
  else
     session_config = config
  end if

  if (rank == 0) then
     if (brisk_create(s, session_config, verbose=.true.) /= BRISK_OK) call fail('create')
     if (bad == 0) then
        if (brisk_sizes(s, in_w, tg_w) /= BRISK_OK) call fail('sizes')
        if (in_w /= ncoarse .or. tg_w /= nfine) then
           write (error_unit, '(a, 2i6)') 'online: unexpected sample sizes', in_w, tg_w
           bad = 1
        end if
     end if
  end if
  deallocate (session_config)  ! the session keeps its own copy; a main program's are never freed

  do k = 1, steps_per_epoch * epochs
     do j = first, first + nloc - 1
        call column_fields(j, k, coarse(:, j), fine(:, j))
     end do
#ifdef BRISK_EXAMPLE_MPI
     if (rank == 0) then
        call MPI_Gather(MPI_IN_PLACE, nloc * ncoarse, MPI_REAL, coarse, nloc * ncoarse, MPI_REAL, 0, MPI_COMM_WORLD, ierr)
        call MPI_Gather(MPI_IN_PLACE, nloc * nfine, MPI_REAL, fine, nloc * nfine, MPI_REAL, 0, MPI_COMM_WORLD, ierr)
     else
        call MPI_Gather(coarse(1, first), nloc * ncoarse, MPI_REAL, coarse, nloc * ncoarse, MPI_REAL, 0, &
             MPI_COMM_WORLD, ierr)
        call MPI_Gather(fine(1, first), nloc * nfine, MPI_REAL, fine, nloc * nfine, MPI_REAL, 0, MPI_COMM_WORLD, ierr)
     end if
#endif
     if (rank /= 0 .or. bad /= 0) cycle
     if (brisk_push(s, coarse, fine) /= BRISK_OK) call fail('push')
     if (bad == 0 .and. mod(k, steps_per_epoch) == 0) then
        e = k / steps_per_epoch
        if (brisk_train_epochs(s, 1_int64) /= BRISK_OK) call fail('train')
        if (bad == 0) then
           if (brisk_query(s, 'train_loss', loss(e)) /= BRISK_OK) call fail('query')
           write (*, '(a, i4, a, i2, a, f8.4)') 'step ', k, ': trained epoch ', e, ' over the buffer, loss ', loss(e)
        end if
     end if
  end do

  if (rank == 0 .and. bad == 0) then
     if (.not. (loss(epochs) < loss(1))) then
        write (error_unit, '(a, 2f9.4)') 'online: the loss did not decrease:', loss(1), loss(epochs)
        bad = 1
     end if
  end if
  ! Downscale the last step's coarse fields (DDIM, 10 steps, eta 0), each chain starting from
  ! noise around the coarse block values (the model's last noise level keeps signal, so pure
  ! noise would be the wrong start), and score them. The imported model predicts them.
  if (rank == 0 .and. bad == 0 .and. imported) then
     sampled = -huge(1.0_c_float)
     if (brisk_predict(s, coarse, sampled) /= BRISK_OK) call fail('predict')
  else if (rank == 0 .and. bad == 0) then
     do j = 1, columns
        do i = 1, nfine
           guess(i, j) = coarse(1 + ((i - 1) * ncoarse) / nfine, j)
        end do
     end do
     sampled = -huge(1.0_c_float)
     if (brisk_sample(s, coarse, sampled, method=BRISK_SAMPLER_DDIM, steps=10, eta=0.0d0, seed=1_int64, &
          guess=guess) /= BRISK_OK) call fail('sample')
  end if
  if (rank == 0 .and. bad == 0) then
     if (size(sampled, 1) /= nfine .or. size(sampled, 2) /= columns .or. .not. all(ieee_is_finite(sampled)) &
          .or. any(sampled == -huge(1.0_c_float))) then
        write (error_unit, '(a)') 'online: the samples are not 256 x 80 finite values'
        bad = 1
     else
        se = 0
        sb = 0
        do j = 1, columns
           do i = 1, nfine
              se = se + (sampled(i, j) - fine(i, j))**2
              sb = sb + (coarse(1 + ((i - 1) * ncoarse) / nfine, j) - fine(i, j))**2
           end do
        end do
        write (*, '(a, i3, a, i4, a, f7.4, a, f7.4, a)') merge('predicted', 'sampled  ', imported), columns, ' x ', &
             nfine, ' fine values: RMSE to the truth ', sqrt(se / (columns * nfine)), ' (coarse block values: ', &
             sqrt(sb / (columns * nfine)), ')'
        if (imported .and. .not. (se < sb)) then
           write (error_unit, '(a)') 'online: the trained model is no closer to the truth than the coarse block values'
           bad = 1
        end if
     end if
     if (bad == 0 .and. command_argument_count() > 0) then
        call get_command_argument(1, ckpt)
        if (brisk_save(s, ckpt) /= BRISK_OK) call fail('save')
     end if
  end if
#ifdef BRISK_EXAMPLE_MPI
  ! every rank gets its columns' sampled fields back, and everyone learns whether it worked
  call MPI_Bcast(bad, 1, MPI_INTEGER, 0, MPI_COMM_WORLD, ierr)
  if (bad == 0) then
     if (rank == 0) then
        call MPI_Scatter(sampled, nloc * nfine, MPI_REAL, MPI_IN_PLACE, nloc * nfine, MPI_REAL, 0, MPI_COMM_WORLD, ierr)
     else
        call MPI_Scatter(sampled, nloc * nfine, MPI_REAL, sampled(1, first), nloc * nfine, MPI_REAL, 0, &
             MPI_COMM_WORLD, ierr)
     end if
     if (.not. all(ieee_is_finite(sampled(:, first:first + nloc - 1)))) bad = 1
     write (*, '(a, i2, a, i3, a)') 'rank ', rank, ': ', nloc, ' sampled columns back'
  end if
  call MPI_Allreduce(bad, any_bad, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
  bad = any_bad
#endif
  if (rank == 0) then
     if (brisk_destroy(s) /= BRISK_OK) bad = 1
     if (bad == 0) then
        write (*, '(a)') 'ok'
     else
        write (*, '(a)') 'FAILED'
     end if
  end if
#ifdef BRISK_EXAMPLE_MPI
  call MPI_Finalize(ierr)
#endif
  if (bad /= 0) error stop 1

contains

  subroutine fail(what)
    character(len=*), intent(in) :: what
    write (error_unit, '(a)') 'online: ' // what // ': ' // brisk_error_message(s)
    bad = 1
  end subroutine fail

  ! The toy simulation: column j at time step k (see examples/c/online.c).
  subroutine column_fields(j, k, c, f)
    integer, intent(in) :: j, k
    real(c_float), intent(out) :: c(ncoarse), f(nfine)
    real(c_double), parameter :: pi = 3.14159265358979_c_double
    real(c_double) :: x, phase, base
    integer :: i, m, a, b
    phase = 2 * pi * (j - 1) / columns
    do i = 1, nfine
       x = (i - 0.5_c_double) / nfine
       base = sin(2 * pi * x + phase + 0.05_c_double * k) + 0.6_c_double * sin(4 * pi * x + 2 * phase - 0.03_c_double * k) &
            + 0.3_c_double * sin(6 * pi * x + 0.02_c_double * k * (1 + mod(j - 1, 3)))
       f(i) = real(base + 0.2_c_double * sin(24 * pi * x + phase + 0.1_c_double * k) * (0.5_c_double + 0.5_c_double &
            * sin(2 * pi * x)), c_float)
    end do
    do m = 0, ncoarse - 1
       a = m * nfine / ncoarse
       b = (m + 1) * nfine / ncoarse
       c(m + 1) = real(sum(real(f(a + 1:b), c_double)) / (b - a), c_float)
    end do
  end subroutine column_fields

end program online
