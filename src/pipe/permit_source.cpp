#include "pipe/permit_source.hpp"

namespace ratelimit::pipe {

using std::chrono::nanoseconds;

std::optional<nanoseconds> LocalPermitSource::turn(std::int64_t, nanoseconds) {
  return bucket_.state().next_free;
}

void LocalPermitSource::consume(std::int64_t units, nanoseconds requested_at) {
  // Booked at the time of the request, as Guava's acquire() does before it sleeps, so that the
  // time spent writing is not added to the schedule.
  if (units > 0) bucket_.reserve(units, requested_at);
}

void LocalPermitSource::set_rate(double units_per_second, nanoseconds now) {
  bucket_.set_rate(units_per_second, now);
}

SharedPermitSource::SharedPermitSource(backends::BucketBackend& backend,
                                       backends::PermitRequest request, io::Waiter& waiter,
                                       OnReplaced on_replaced)
    : backend_(backend),
      request_(std::move(request)),
      waiter_(waiter),
      on_replaced_(std::move(on_replaced)) {
  request_.apply_params = true;
  request_.deadline = nanoseconds::max();
}

bool SharedPermitSource::book(std::int64_t units) {
  request_.permits = units;
  const backends::Reservation reservation = backend_.reserve(request_, waiter_);
  if (reservation.signal != 0) return false;
  if (reservation.replaced_params && on_replaced_) on_replaced_(*reservation.replaced_params);
  request_.apply_params = false;
  const nanoseconds now = waiter_.now();
  credit_due_ =
      reservation.wait > nanoseconds::max() - now ? nanoseconds::max() : now + reservation.wait;
  credit_ += units;
  return true;
}

std::optional<nanoseconds> SharedPermitSource::turn(std::int64_t units, nanoseconds) {
  if (credit_ < units && !book(units - credit_)) return std::nullopt;
  return credit_due_;
}

void SharedPermitSource::consume(std::int64_t units, nanoseconds) {
  credit_ -= units;
  // More moved than booked (what was read goes out after a stop signal): booked now, not waited
  // for, so the key counts it.
  if (credit_ < 0) {
    const nanoseconds due = credit_due_;
    const std::int64_t missing = -credit_;
    credit_ = 0;
    book(missing);
    credit_ = 0;
    credit_due_ = due;
  }
}

void SharedPermitSource::set_rate(double units_per_second, nanoseconds) {
  request_.params.permits_per_second = units_per_second;
  backend_.set_rate(request_.key, units_per_second);
}

}  // namespace ratelimit::pipe
