//! reel-collect's tests: arrival (retries, order, lateness), decoding and
//! the HTTP door (bad input, limits, the token), and the mapping row by row.

mod arrival;
mod door;
mod mapping;
mod seeds;
mod support;
