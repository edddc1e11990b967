//! Path estimation (seed 000, section IV): rate samplers, sliding-window
//! distributions and predictors. Being built; see issue 2.
