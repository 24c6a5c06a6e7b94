! Every bad call a Fortran program can make through the binding returns a status and a message
! of its own, in the binding's terms (argument(element, sample), 1-based): arrays whose first
! dimension is not the model's width, column counts that differ, NaN in pushed or sampled
! inputs, a handle copied and used after brisk_destroy. Compiled with -std=f2008; ends with
! STOP, where gfortran reports floating-point flags left raised (the test fails on that note).
program binding_errors
  use, intrinsic :: iso_c_binding, only: c_float, c_double
  use, intrinsic :: iso_fortran_env, only: int64, error_unit
  use, intrinsic :: ieee_arithmetic, only: ieee_value, ieee_quiet_nan
  use brisk
  implicit none
  character(len=*), parameter :: config = &
       '{"model": {"type": "diffusion", "fine": 256, "coarse": 7, "hidden": [16], "noise": {"steps": 5}},' // &
       ' "data": {"validation_fraction": 0}, "train": {"batch_size": 4},' // &
       ' "speed": {"threads": 1, "prefetch": 0}}'
  type(brisk_session) :: s, s2
  real(c_float) :: coarse(7, 8), fine(256, 8), out(256, 8), coarse8(8, 8), fine257(257, 8), short(6, 8)
  real(c_float) :: c10(7, 10), f9(256, 9), one_c(7, 1), one_f(256, 1)
  real(c_double) :: v
  integer :: failures, i, j

  failures = 0
  do j = 1, 8
     do i = 1, 7
        coarse(i, j) = real(i + j, c_float) / 10
     end do
     do i = 1, 256
        fine(i, j) = sin(real(i * j, c_float) / 50)
     end do
  end do
  ! values near the bottom of the float range: training on them raises the underflow and
  ! denormal flags, which brisk must not leave raised for the caller
  coarse(1, :) = 1.0e-38_c_float
  coarse8 = 0
  fine257 = 0
  short = 0
  c10 = 0
  f9 = 0

  i = brisk_create(s, config)  ! not inside expect's arguments: it defines s
  call expect('create', s, i, BRISK_OK, '')
  ! first dimension not the model's width
  call expect('push coarse(8, n)', s, brisk_push(s, coarse8, fine), BRISK_ERR_SHAPE, &
       'brisk_push: input has shape (8, 8); expected (7, n)')
  call expect('push fine(257, n)', s, brisk_push(s, coarse, fine257), BRISK_ERR_SHAPE, &
       'brisk_push: target has shape (257, 8); expected (256, n)')
  call expect('push coarse(6, n)', s, brisk_push(s, short, fine), BRISK_ERR_SHAPE, 'input has shape (6, 8)')
  call expect('sample coarse(8, n)', s, brisk_sample(s, coarse8, out), BRISK_ERR_SHAPE, &
       'brisk_sample: coarse has shape (8, 8); expected (7, n)')
  call expect('sample fine(257, n)', s, brisk_sample(s, coarse, fine257), BRISK_ERR_SHAPE, 'fine has shape (257, 8)')
  call expect('sample guess(257, n)', s, brisk_sample(s, coarse, out, guess=fine257), BRISK_ERR_SHAPE, &
       'guess has shape (257, 8)')
  ! column counts that differ: their own message, not an empty or a stale one
  call expect('sample guess(256, 0)', s, brisk_sample(s, coarse, out, guess=fine(:, 1:0)), BRISK_ERR_SHAPE, &
       'brisk_sample: guess has 0 samples (columns) and fine has 8')
  call expect('push 10 and 9 columns', s, brisk_push(s, c10, f9), BRISK_ERR_SHAPE, &
       'brisk_push: input has 10 samples (columns) and target has 9; expected the same number')
  call expect('sample 10 and 8 columns', s, brisk_sample(s, c10, out), BRISK_ERR_SHAPE, &
       'brisk_sample: coarse has 10 samples (columns) and fine has 8')
  call expect('predict on a diffusion model', s, brisk_predict(s, coarse, out), BRISK_ERR_UNSUPPORTED, 'brisk_sample')
  ! NaN, reported where the caller put it
  fine(100, 3) = ieee_value(fine(100, 3), ieee_quiet_nan)
  call expect('push NaN', s, brisk_push(s, coarse, fine), BRISK_ERR_NUMERIC, &
       'brisk_push: target(100, 3) is NaN; expected finite values (nothing was added)')
  fine(100, 3) = 0
  call expect('push', s, brisk_push(s, coarse, fine), BRISK_OK, '')
  call expect('train', s, brisk_train_epochs(s, 1_int64), BRISK_OK, '')
  coarse(5, 2) = ieee_value(coarse(5, 2), ieee_quiet_nan)
  out = -7
  call expect('sample NaN', s, brisk_sample(s, coarse, out), BRISK_ERR_NUMERIC, &
       'brisk_sample: coarse(5, 2) is NaN; expected finite values (nothing was written)')
  if (any(out /= -7)) call fail('sample NaN wrote into fine')
  coarse(5, 2) = 0
  ! one sample: arrays of shape (n, 1)
  one_c(:, 1) = coarse(:, 1)
  one_f(:, 1) = fine(:, 1)
  call expect('push one sample', s, brisk_push(s, one_c, one_f), BRISK_OK, '')
  call expect('sample one sample', s, brisk_sample(s, one_c, one_f, method=BRISK_SAMPLER_DDIM, steps=2, &
       eta=0.0_c_double, seed=3_int64), BRISK_OK, '')
  call expect('query', s, brisk_query(s, 'buffered', v), BRISK_OK, '')
  if (v /= 9) call fail('buffered is not 9')
  ! a copy of the handle, used after destroy
  s2 = s
  call expect('destroy', s, brisk_destroy(s), BRISK_OK, '')
  call expect('push through a copy', s2, brisk_push(s2, coarse, fine), BRISK_ERR_INVALID, 'destroyed')
  call expect('sample through a copy', s2, brisk_sample(s2, coarse, out), BRISK_ERR_INVALID, 'destroyed')
  call expect('train through a copy', s2, brisk_train_epochs(s2, 1_int64), BRISK_ERR_INVALID, 'destroyed')
  call expect('query through the original', s, brisk_query(s, 'steps', v), BRISK_ERR_INVALID, 'destroyed')
  call expect('stop through a copy', s2, brisk_request_stop(s2), BRISK_ERR_INVALID, 'destroyed')
  call expect('destroy again', s2, brisk_destroy(s2), BRISK_ERR_INVALID, 'destroyed')

  if (failures > 0) then
     write (error_unit, '(i0, a)') failures, ' checks failed'
     error stop 1
  end if
  write (*, '(a)') 'ok'
  stop

contains

  subroutine fail(what)
    character(len=*), intent(in) :: what
    write (error_unit, '(a)') 'FAIL ' // what
    failures = failures + 1
  end subroutine fail

  ! A status and a message containing `text`: the message of this very call on h.
  subroutine expect(what, h, status, want, text)
    character(len=*), intent(in) :: what, text
    type(brisk_session), intent(in) :: h
    integer, intent(in) :: status, want
    character(len=:), allocatable :: msg
    msg = brisk_error_message(h)
    if (status /= want) then
       write (error_unit, '(a, i0, a, i0, a)') 'FAIL ' // what // ': status ', status, ', expected ', want, &
            ': ' // msg
       failures = failures + 1
    else if (index(msg, text) == 0) then
       write (error_unit, '(a)') 'FAIL ' // what // ': message "' // msg // '" lacks "' // text // '"'
       failures = failures + 1
    else
       write (*, '(a)') 'ok   ' // what // ': ' // msg
    end if
  end subroutine expect

end program binding_errors
