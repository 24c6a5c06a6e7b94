! A simulation as a climate-model developer writes one around brisk (issue 18's trial, at test
! sizes): 500 model steps with its own compute between brisk calls, each step pushing the
! (coarse 7, fine 256) pairs of its columns, training every 48 steps, and at the end sampling
! an 8-member ensemble. Plain Fortran 2008 through the binding; built once as a serial program
! and once with -DBRISK_TEST_MPI, where every rank holds its own session (seed + rank, run
! directory <dir>/rank<R>) and the ranks agree, after every step, on whether to stop.
!
! Preemption, as examples/README.md recommends: brisk's handlers ("session": {"stop_signals":
! true}) turn SIGTERM / SIGUSR1 into a stop request; a train call then finishes its step,
! writes <dir>/rank<R>/last.safetensors and returns BRISK_STOPPED. The program acts on it: all
! ranks stop after the same model step, save their model and their own state, and exit 75.
!
!   sim DIR [run|stop|resume] [trial]
!     run     the whole simulation (default)
!     stop    the same, but the train call at step 240 asks for 2000 epochs and says so on
!             stdout ("long training"), for a test to send SIGTERM into it; exits 75
!     resume  continues a stopped run from DIR's saved state to step 500
!     trial   the trial's sizes (80 columns, hidden [256, 256, 256], 50 noise steps) for timing
program sim
  use, intrinsic :: iso_c_binding, only: c_float, c_double, c_int
  use, intrinsic :: iso_fortran_env, only: int64, error_unit, output_unit
  use, intrinsic :: ieee_arithmetic, only: ieee_is_finite
  use brisk
#ifdef BRISK_TEST_MPI
  use mpi
#endif
  implicit none
  integer, parameter :: nsteps = 500, train_every = 48, ncoarse = 7, nfine = 256, members = 8, stop_step = 240
  type(brisk_session) :: s
  real(c_float), allocatable :: coarse(:, :), fine(:, :), guess(:, :), ens(:, :, :)
  real(c_double) :: v, t0, t_train, t_start, t_total, loss
  character(len=512) :: dir, rundir, mode, sizes
  character(len=:), allocatable :: config
  integer :: rank, ranks, columns, k, k0, j, m, i, st, calls, stop_here, stop_any, u
  integer(int64) :: epochs
#ifdef BRISK_TEST_MPI
  integer :: ierr
  call MPI_Init(ierr)
  call MPI_Comm_rank(MPI_COMM_WORLD, rank, ierr)
  call MPI_Comm_size(MPI_COMM_WORLD, ranks, ierr)
#else
  rank = 0
  ranks = 1
#endif
  dir = 'sim_run'
  mode = 'run'
  sizes = ''
  if (command_argument_count() >= 1) call get_command_argument(1, dir)
  if (command_argument_count() >= 2) call get_command_argument(2, mode)
  if (command_argument_count() >= 3) call get_command_argument(3, sizes)
  write (rundir, '(a, a, i0)') trim(dir), '/rank', rank

  if (sizes == 'trial') then
     columns = 80
     config = make_config('[256, 256, 256]', 50, columns * train_every)
  else
     columns = 8
     config = make_config('[64]', 10, columns * train_every)
  end if
  allocate(coarse(ncoarse, columns), fine(nfine, columns), guess(nfine, columns), ens(nfine, columns, members))

  call check(brisk_create(s, config), 'create')
  deallocate(config) ! allocatables of the main program outlive STOP (leak checkers say so)
  call write_pid()
  k0 = 1
  if (mode == 'resume') call restore(k0)

  t_train = 0
  calls = 0
  t_start = now()
  stop_here = 0
  do k = k0, nsteps
     ! the simulation's own work: this rank's columns at step k
     do j = 1, columns
        call column_fields(rank * columns + j, k, coarse(:, j), fine(:, j))
     end do
     call check(brisk_push(s, coarse, fine), 'push')
     if (mod(k, train_every) == 0) then
        epochs = 1
        if (mode == 'stop' .and. k == stop_step) then
           epochs = 2000
           write (output_unit, '(a, i0, a, i0)') 'rank ', rank, ': long training at step ', k
           flush (output_unit)
        end if
        t0 = now()
        st = brisk_train_epochs(s, epochs)
        t_train = t_train + (now() - t0)
        calls = calls + 1
        if (st == BRISK_STOPPED) then
           ! the checkpoint is written; the message says after which optimizer step
           write (output_unit, '(a, i0, a)') 'rank ', rank, ': BRISK_STOPPED: ' // brisk_error_message(s)
           stop_here = 1
        else
           call check(st, 'train')
        end if
     end if
     ! a signal may also land between train calls: brisk_stop_signal() tells
     if (brisk_stop_signal() /= 0) stop_here = 1
#ifdef BRISK_TEST_MPI
     call MPI_Allreduce(stop_here, stop_any, 1, MPI_INTEGER, MPI_MAX, MPI_COMM_WORLD, ierr)
#else
     stop_any = stop_here
#endif
     if (stop_any /= 0) then
        call save_state(k)
        deallocate(coarse, fine, guess, ens)
#ifdef BRISK_TEST_MPI
        call MPI_Finalize(ierr)
#endif
        stop 75
     end if
  end do
  t_total = now() - t_start

  call check(brisk_query(s, 'train_loss', loss), 'query')
  ! an ensemble of the last step's fields: members are the same call with seeds 1, 2, ...
  do j = 1, columns
     do i = 1, nfine
        guess(i, j) = coarse(1 + ((i - 1) * ncoarse) / nfine, j)
     end do
  end do
  do m = 1, members
     call check(brisk_sample(s, coarse, ens(:, :, m), method=BRISK_SAMPLER_DDIM, steps=5, eta=0.0_c_double, &
          seed=int(m, int64), guess=guess), 'sample')
  end do
  if (.not. all(ieee_is_finite(ens))) call die('the ensemble has non-finite values')
  call check(brisk_query(s, 'steps', v), 'query')
  write (output_unit, '(a, i0, a, i0, a, f0.1, a, f0.4, a, f0.3, a)') 'rank ', rank, ': ', calls, &
       ' train calls, ', v, ' optimizer steps, loss ', loss, ', ensemble spread ', &
       sqrt(sum((ens - spread_mean(ens))**2) / size(ens)), ''
  write (output_unit, '(a, i0, a, f0.2, a, f0.2, a)') 'rank ', rank, ': time in brisk train calls ', t_train, &
       ' s of ', t_total, ' s'
  call check(brisk_destroy(s), 'destroy')
  deallocate(coarse, fine, guess, ens)
#ifdef BRISK_TEST_MPI
  call MPI_Finalize(ierr)
#endif
  stop

contains

  function make_config(hidden, noise, capacity) result(c)
    character(len=*), intent(in) :: hidden
    integer, intent(in) :: noise, capacity
    character(len=:), allocatable :: c
    character(len=16) :: seed, cap, ns, resume
    write (seed, '(i0)') 7 + rank
    ! a restarted simulation continues its run directory's run; a new one replaces it
    resume = 'overwrite'
    if (mode == 'resume') resume = 'auto'

    write (cap, '(i0)') capacity
    write (ns, '(i0)') noise
    c = '{"model": {"type": "diffusion", "fine": 256, "coarse": 7, "hidden": ' // hidden // ',' // &
         ' "noise": {"steps": ' // trim(ns) // ', "prediction": "x0"}},' // &
         ' "data": {"validation_fraction": 0, "buffer": {"capacity": ' // trim(cap) // '}},' // &
         ' "train": {"batch_size": 16, "seed": ' // trim(seed) // ', "log_every": 100000,' // &
         ' "out_dir": "' // trim(rundir) // '"},' // &
         ' "session": {"stop_signals": true, "resume": "' // trim(resume) // '"},' // &
         ' "speed": {"threads": 0, "prefetch": 0}}'
  end function make_config

  function spread_mean(e) result(mean)
    real(c_float), intent(in) :: e(:, :, :)
    real(c_float) :: mean(size(e, 1), size(e, 2), size(e, 3))
    integer :: q
    do q = 1, size(e, 3)
       mean(:, :, q) = sum(e, dim=3) / size(e, 3)
    end do
  end function spread_mean

  real(c_double) function now()
    integer(int64) :: count, rate
    call system_clock(count, rate)
    now = real(count, c_double) / real(rate, c_double)
  end function now

  subroutine check(status, what)
    integer, intent(in) :: status
    character(len=*), intent(in) :: what
    if (status /= BRISK_OK) call die(what // ': ' // brisk_error_message(s))
  end subroutine check

  subroutine die(msg)
    character(len=*), intent(in) :: msg
    write (error_unit, '(a, i0, a)') 'sim rank ', rank, ': ' // msg
#ifdef BRISK_TEST_MPI
    call MPI_Abort(MPI_COMM_WORLD, 1, ierr)
#endif
    error stop 1
  end subroutine die

  ! <rundir>.pid, for a test that signals every rank as a batch system would
  subroutine write_pid()
    integer :: pid
    interface
       integer(c_int) function getpid() bind(C, name='getpid')
         import :: c_int
       end function getpid
    end interface
    pid = getpid()
    open (newunit=u, file=trim(rundir) // '.pid', action='write', status='replace')
    write (u, '(i0)') pid
    close (u)
  end subroutine write_pid

  ! The program's own checkpoint: the model and the last model step done.
  subroutine save_state(k_done)
    integer, intent(in) :: k_done
    call check(brisk_save(s, trim(rundir) // '/model.safetensors'), 'save')
    open (newunit=u, file=trim(rundir) // '/sim_state.txt', action='write', status='replace')
    write (u, '(i0)') k_done
    close (u)
    write (output_unit, '(a, i0, a, i0)') 'rank ', rank, ': stopped after model step ', k_done
    flush (output_unit)
  end subroutine save_state

  subroutine restore(k_next)
    integer, intent(out) :: k_next
    integer :: k_done
    open (newunit=u, file=trim(rundir) // '/sim_state.txt', action='read', status='old')
    read (u, *) k_done
    close (u)
    call check(brisk_load(s, trim(rundir) // '/model.safetensors'), 'load')
    call check(brisk_query(s, 'steps', v), 'query')
    write (output_unit, '(a, i0, a, i0, a, f0.1)') 'rank ', rank, ': resumed after model step ', k_done, &
         ' at optimizer step ', v
    k_next = k_done + 1
  end subroutine restore

  ! The toy model: column j at step k, a smooth field plus small scales; coarse = block means.
  subroutine column_fields(j, k, c, f)
    integer, intent(in) :: j, k
    real(c_float), intent(out) :: c(ncoarse), f(nfine)
    real(c_double), parameter :: pi = 3.14159265358979_c_double
    real(c_double) :: x, phase
    integer :: q, a, b
    phase = 2 * pi * (j - 1) / 64
    do q = 1, nfine
       x = (q - 0.5_c_double) / nfine
       f(q) = real(sin(2 * pi * x + phase + 0.05_c_double * k) + 0.6_c_double * sin(4 * pi * x - 0.03_c_double * k) &
            + 0.2_c_double * sin(24 * pi * x + phase), c_float)
    end do
    do q = 0, ncoarse - 1
       a = q * nfine / ncoarse
       b = (q + 1) * nfine / ncoarse
       c(q + 1) = real(sum(real(f(a + 1:b), c_double)) / (b - a), c_float)
    end do
  end subroutine column_fields

end program sim
