! brisk for Fortran: the stable C API of include/brisk/api.h through ISO_C_BINDING.
!
! Arrays are Fortran arrays with one sample per column: input(width, n), target(width, n),
! coarse(7, n), fine(256, n) for the example denoiser (a column is what api.h calls a row; one
! sample is an array of shape (width, 1)). The first dimension must be exactly the model's
! width and both arrays of a call must have as many columns; a section like fields(:, 1:80)
! of a larger array works (a non-contiguous one is copied by the compiler). Every function
! returns an integer status (BRISK_OK = 0); brisk_error_message(s) then says what went wrong,
! in the binding's terms: 1-based indices as argument(element, sample), e.g.
! "brisk_push: target(100, 3) is NaN".
!
!   use brisk
!   use, intrinsic :: iso_fortran_env, only: int64, error_unit
!   type(brisk_session) :: s
!   if (brisk_create(s, config_json) /= BRISK_OK) then
!      write (error_unit, '(a)') brisk_error_message(s)
!      error stop 1
!   end if
!   st = brisk_push(s, coarse, fine)                 ! every model step
!   st = brisk_train_epochs(s, 1_int64)              ! every 48 steps (BRISK_STOPPED: save, exit)
!   st = brisk_sample(s, coarse, fine_out, BRISK_SAMPLER_DDIM, 10, 0.0_c_double, seed)
!   st = brisk_destroy(s)
!
! Data parallel across a simulation's MPI ranks: put the communicator's Fortran handle into the
! config, and every rank trains one model on all ranks' pushed samples (include/brisk/api.h):
!   write (config_json, '(a, i0, a)') '{"model": {...}, "session": {"mpi_comm": ', MPI_COMM_WORLD, '}}'
! (with mpi_f08: comm%MPI_VAL); brisk turns it into its communicator with MPI_Comm_f2c.
!
! A type(brisk_session) holds a handle: a copy (s2 = s) names the same session, and after
! brisk_destroy every call through any copy returns BRISK_ERR_INVALID ("destroyed").
! Like the C library, the module never calls MPI: one session per thread or per MPI rank, or
! one on the rank that gathers (examples/fortran/online.F90).
module brisk
  use, intrinsic :: iso_c_binding
  use, intrinsic :: iso_fortran_env, only: output_unit, error_unit, int64
  implicit none
  private

  integer, parameter, public :: BRISK_OK = 0, BRISK_ERR_INVALID = 1, BRISK_ERR_IO = 2, &
       BRISK_ERR_FORMAT = 3, BRISK_ERR_SHAPE = 4, BRISK_ERR_NOMEM = 5, BRISK_ERR_UNSUPPORTED = 6, &
       BRISK_ERR_NUMERIC = 7, BRISK_ERR_INTERNAL = 8, BRISK_ERR_FULL = 9, BRISK_STOPPED = 10, &
       BRISK_BUSY = 11
  integer, parameter, public :: BRISK_SAMPLER_DDPM = 0, BRISK_SAMPLER_DDIM = 1

  ! A session handle; default-initialised to no session.
  type, public :: brisk_session
     type(c_ptr) :: ptr = c_null_ptr
  end type brisk_session

  public :: brisk_create, brisk_create_file, brisk_destroy, brisk_error_message, brisk_sizes, &
       brisk_push, brisk_clear, brisk_train_epochs, brisk_train_steps, brisk_save, brisk_load, &
       brisk_predict, brisk_sample, brisk_query, brisk_request_stop, brisk_clear_stop, &
       brisk_stop_signals_install, brisk_stop_signal

  interface
     integer(c_int) function c_create(json, log, user, out) bind(C, name="brisk_session_create")
       import :: c_int, c_char, c_funptr, c_ptr
       character(kind=c_char), dimension(*), intent(in) :: json
       type(c_funptr), value :: log
       type(c_ptr), value :: user
       type(c_ptr), intent(out) :: out
     end function c_create
     integer(c_int) function c_create_file(path, log, user, out) bind(C, name="brisk_session_create_file")
       import :: c_int, c_char, c_funptr, c_ptr
       character(kind=c_char), dimension(*), intent(in) :: path
       type(c_funptr), value :: log
       type(c_ptr), value :: user
       type(c_ptr), intent(out) :: out
     end function c_create_file
     integer(c_int) function c_destroy(s) bind(C, name="brisk_session_destroy")
       import :: c_int, c_ptr
       type(c_ptr), value :: s
     end function c_destroy
     type(c_ptr) function c_error(s) bind(C, name="brisk_session_error")
       import :: c_ptr
       type(c_ptr), value :: s
     end function c_error
     integer(c_int) function c_sizes(s, input_width, target_width) bind(C, name="brisk_session_sizes")
       import :: c_int, c_ptr, c_int64_t
       type(c_ptr), value :: s
       integer(c_int64_t), intent(out) :: input_width, target_width
     end function c_sizes
     integer(c_int) function c_push(s, in_rows, in_cols, input, tg_rows, tg_cols, target) &
          bind(C, name="brisk_f_push")
       import :: c_int, c_ptr, c_int64_t, c_float
       type(c_ptr), value :: s
       integer(c_int64_t), value :: in_rows, in_cols, tg_rows, tg_cols
       real(c_float), dimension(*), intent(in) :: input, target
     end function c_push
     integer(c_int) function c_clear(s) bind(C, name="brisk_session_clear")
       import :: c_int, c_ptr
       type(c_ptr), value :: s
     end function c_clear
     integer(c_int) function c_train_epochs(s, n) bind(C, name="brisk_session_train_epochs")
       import :: c_int, c_ptr, c_int64_t
       type(c_ptr), value :: s
       integer(c_int64_t), value :: n
     end function c_train_epochs
     integer(c_int) function c_train_steps(s, n) bind(C, name="brisk_session_train_steps")
       import :: c_int, c_ptr, c_int64_t
       type(c_ptr), value :: s
       integer(c_int64_t), value :: n
     end function c_train_steps
     integer(c_int) function c_save(s, path) bind(C, name="brisk_session_save")
       import :: c_int, c_ptr, c_char
       type(c_ptr), value :: s
       character(kind=c_char), dimension(*), intent(in) :: path
     end function c_save
     integer(c_int) function c_load(s, path) bind(C, name="brisk_session_load")
       import :: c_int, c_ptr, c_char
       type(c_ptr), value :: s
       character(kind=c_char), dimension(*), intent(in) :: path
     end function c_load
     integer(c_int) function c_predict(s, in_rows, in_cols, input, out_rows, out_cols, output) &
          bind(C, name="brisk_f_predict")
       import :: c_int, c_ptr, c_int64_t, c_float
       type(c_ptr), value :: s
       integer(c_int64_t), value :: in_rows, in_cols, out_rows, out_cols
       real(c_float), dimension(*), intent(in) :: input
       real(c_float), dimension(*), intent(inout) :: output
     end function c_predict
     integer(c_int) function c_sample(s, c_rows, c_cols, coarse, g_rows, g_cols, guess, f_rows, f_cols, fine, &
          method, steps, eta, seed) bind(C, name="brisk_f_sample")
       import :: c_int, c_ptr, c_int64_t, c_float, c_double
       type(c_ptr), value :: s
       integer(c_int64_t), value :: c_rows, c_cols, g_rows, g_cols, f_rows, f_cols, seed
       real(c_float), dimension(*), intent(in) :: coarse
       type(c_ptr), value :: guess
       real(c_float), dimension(*), intent(inout) :: fine
       integer(c_int), value :: method, steps
       real(c_double), value :: eta
     end function c_sample
     integer(c_int) function c_request_stop(s) bind(C, name="brisk_session_request_stop")
       import :: c_int, c_ptr
       type(c_ptr), value :: s
     end function c_request_stop
     integer(c_int) function c_clear_stop(s) bind(C, name="brisk_session_clear_stop")
       import :: c_int, c_ptr
       type(c_ptr), value :: s
     end function c_clear_stop
     integer(c_int) function c_stop_signals_install() bind(C, name="brisk_stop_signals_install")
       import :: c_int
     end function c_stop_signals_install
     integer(c_int) function c_stop_signal() bind(C, name="brisk_stop_signal")
       import :: c_int
     end function c_stop_signal
     integer(c_int) function c_query(s, name, value) bind(C, name="brisk_session_query")
       import :: c_int, c_ptr, c_char, c_double
       type(c_ptr), value :: s
       character(kind=c_char), dimension(*), intent(in) :: name
       real(c_double), intent(out) :: value
     end function c_query
     integer(c_size_t) function c_strlen(p) bind(C, name="strlen")
       import :: c_size_t, c_ptr
       type(c_ptr), value :: p
     end function c_strlen
  end interface

contains

  ! A Fortran string as a NUL-terminated C string (trailing blanks kept: they may matter in JSON
  ! only inside strings, and paths are trimmed by the caller's choice).
  pure function c_str(s) result(c)
    character(len=*), intent(in) :: s
    character(kind=c_char, len=len(s) + 1) :: c
    c = s // c_null_char
  end function c_str

  function f_str(p) result(s)
    type(c_ptr), intent(in) :: p
    character(len=:), allocatable :: s
    character(kind=c_char), pointer :: chars(:)
    integer :: i, n
    if (.not. c_associated(p)) then
       s = ''
       return
    end if
    n = int(c_strlen(p))
    call c_f_pointer(p, chars, [n])
    allocate(character(len=n) :: s)
    do i = 1, n
       s(i:i) = chars(i)
    end do
  end function f_str

  ! The log callback installed by verbose = .true.: progress to standard output, warnings and
  ! errors to standard error.
  subroutine print_log(user, level, msg) bind(C)
    type(c_ptr), value :: user
    integer(c_int), value :: level
    type(c_ptr), value :: msg
    if (level <= 1) then
       write (error_unit, '(a)') 'brisk: ' // f_str(msg)
    else
       write (output_unit, '(a)') f_str(msg)
       flush (output_unit)
    end if
  end subroutine print_log

  function log_fn(verbose) result(fn)
    logical, intent(in), optional :: verbose
    type(c_funptr) :: fn
    fn = c_null_funptr
    if (present(verbose)) then
       if (verbose) fn = c_funloc(print_log)
    end if
  end function log_fn

  ! Creates a session from a JSON config string (see api.h). verbose: print brisk's messages
  ! (default: silent). On failure s still holds the message for brisk_error_message; destroy it.
  integer function brisk_create(s, config, verbose) result(status)
    type(brisk_session), intent(inout) :: s
    character(len=*), intent(in) :: config
    logical, intent(in), optional :: verbose
    status = c_create(c_str(config), log_fn(verbose), c_null_ptr, s%ptr)
  end function brisk_create

  ! The same with the config read from a file.
  integer function brisk_create_file(s, path, verbose) result(status)
    type(brisk_session), intent(inout) :: s
    character(len=*), intent(in) :: path
    logical, intent(in), optional :: verbose
    status = c_create_file(c_str(trim(path)), log_fn(verbose), c_null_ptr, s%ptr)
  end function brisk_create_file

  ! Frees the session. s and every copy of it keep naming the destroyed session: later calls
  ! through them return BRISK_ERR_INVALID and brisk_error_message says "destroyed".
  integer function brisk_destroy(s) result(status)
    type(brisk_session), intent(in) :: s
    status = c_destroy(s%ptr)
  end function brisk_destroy

  ! The message of the last failed call ('' after a success).
  function brisk_error_message(s) result(msg)
    type(brisk_session), intent(in) :: s
    character(len=:), allocatable :: msg
    msg = f_str(c_error(s%ptr))
  end function brisk_error_message

  ! Values per sample: input (coarse) and target (fine; 1 for a classifier's label).
  integer function brisk_sizes(s, input_width, target_width) result(status)
    type(brisk_session), intent(in) :: s
    integer(int64), intent(out) :: input_width, target_width
    integer(c_int64_t) :: a, b
    status = c_sizes(s%ptr, a, b)
    input_width = a
    target_width = b
  end function brisk_sizes

  ! The extents of a dummy array as C's int64_t.
  integer(c_int64_t) function extent(a, dim)
    real(c_float), intent(in) :: a(:, :)
    integer, intent(in) :: dim
    extent = int(size(a, dim), c_int64_t)
  end function extent

  ! Copies the samples in the columns of input(:, n) and target(:, n) into the buffer (one
  ! sample: arrays of shape (width, 1)).
  integer function brisk_push(s, input, target) result(status)
    type(brisk_session), intent(in) :: s
    real(c_float), intent(in) :: input(:, :), target(:, :)
    status = c_push(s%ptr, extent(input, 1), extent(input, 2), input, extent(target, 1), extent(target, 2), target)
  end function brisk_push

  integer function brisk_clear(s) result(status)
    type(brisk_session), intent(in) :: s
    status = c_clear(s%ptr)
  end function brisk_clear

  ! Trains over the buffered samples: `epochs` epochs, or `steps` optimizer steps.
  integer function brisk_train_epochs(s, epochs) result(status)
    type(brisk_session), intent(in) :: s
    integer(int64), intent(in) :: epochs
    status = c_train_epochs(s%ptr, int(epochs, c_int64_t))
  end function brisk_train_epochs

  integer function brisk_train_steps(s, steps) result(status)
    type(brisk_session), intent(in) :: s
    integer(int64), intent(in) :: steps
    status = c_train_steps(s%ptr, int(steps, c_int64_t))
  end function brisk_train_steps

  ! Checkpoints (safetensors, device-agnostic).
  integer function brisk_save(s, path) result(status)
    type(brisk_session), intent(in) :: s
    character(len=*), intent(in) :: path
    status = c_save(s%ptr, c_str(trim(path)))
  end function brisk_save

  integer function brisk_load(s, path) result(status)
    type(brisk_session), intent(in) :: s
    character(len=*), intent(in) :: path
    status = c_load(s%ptr, c_str(trim(path)))
  end function brisk_load

  ! MLP models: output(:, i) = model(input(:, i)).
  integer function brisk_predict(s, input, output) result(status)
    type(brisk_session), intent(in) :: s
    real(c_float), intent(in) :: input(:, :)
    real(c_float), intent(inout) :: output(:, :)
    status = c_predict(s%ptr, extent(input, 1), extent(input, 2), input, extent(output, 1), extent(output, 2), output)
  end function brisk_predict

  ! Diffusion models: fine(:, i) sampled given coarse(:, i). method BRISK_SAMPLER_DDPM (default)
  ! or BRISK_SAMPLER_DDIM; steps 0 (default) = all noise steps; eta DDIM's noise (default 0);
  ! seed the Philox seed (default 0; members of an ensemble: seed, seed + 1, ...); guess(:, i)
  ! a first guess of fine(:, i) to start the chain from noise around (default: pure noise;
  ! see brisk_session_sample_guided in api.h).
  integer function brisk_sample(s, coarse, fine, method, steps, eta, seed, guess) result(status)
    type(brisk_session), intent(in) :: s
    real(c_float), intent(in) :: coarse(:, :)
    real(c_float), intent(inout) :: fine(:, :)
    integer, intent(in), optional :: method, steps
    real(c_double), intent(in), optional :: eta
    integer(int64), intent(in), optional :: seed
    real(c_float), intent(in), optional, target, contiguous :: guess(:, :)
    integer(c_int) :: m, k
    real(c_double) :: e
    integer(c_int64_t) :: sd, g_rows, g_cols
    type(c_ptr) :: g
    m = BRISK_SAMPLER_DDPM
    k = 0
    e = 0.0_c_double
    sd = 0
    g = c_null_ptr
    g_rows = -1 ! no guess
    g_cols = 0
    if (present(method)) m = method
    if (present(steps)) k = steps
    if (present(eta)) e = eta
    if (present(seed)) sd = seed
    if (present(guess)) then
       if (size(guess) > 0) g = c_loc(guess)
       g_rows = extent(guess, 1)
       g_cols = extent(guess, 2)
    end if
    status = c_sample(s%ptr, extent(coarse, 1), extent(coarse, 2), coarse, g_rows, g_cols, g, extent(fine, 1), &
         extent(fine, 2), fine, m, k, e, sd)
  end function brisk_sample

  ! One number about the session by name ("train_loss", "steps", "buffered", ...; api.h).
  integer function brisk_query(s, name, value) result(status)
    type(brisk_session), intent(in) :: s
    character(len=*), intent(in) :: name
    real(c_double), intent(out) :: value
    status = c_query(s%ptr, c_str(trim(name)), value)
  end function brisk_query

  ! Asks s to stop training: the running train call (or the next) finishes its step, writes
  ! its checkpoint (train.out_dir) and returns BRISK_STOPPED, as do all later ones. Safe to
  ! call from a signal handler (it only stores a flag).
  integer function brisk_request_stop(s) result(status)
    type(brisk_session), intent(in) :: s
    status = c_request_stop(s%ptr)
  end function brisk_request_stop

  ! Withdraws the stop (s's own request, and a signal brisk's handlers caught, which is
  ! process-wide): train calls train again.
  integer function brisk_clear_stop(s) result(status)
    type(brisk_session), intent(in) :: s
    status = c_clear_stop(s%ptr)
  end function brisk_clear_stop

  ! Installs brisk's handlers for SIGTERM, SIGINT and SIGUSR1, for programs without their own
  ! (the config's "session": {"stop_signals": true} does it at creation): a caught signal stops
  ! the train calls of every session. Ranks that hold no session call this, then poll
  ! brisk_stop_signal() to agree on a step with those that do.
  integer function brisk_stop_signals_install() result(status)
    status = c_stop_signals_install()
  end function brisk_stop_signals_install

  ! The signal brisk's handlers caught (15 SIGTERM, 2 SIGINT, 10 SIGUSR1 on Linux), 0 if none.
  integer function brisk_stop_signal() result(sig)
    sig = c_stop_signal()
  end function brisk_stop_signal

end module brisk
