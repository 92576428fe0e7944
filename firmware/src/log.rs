//! Logging: `defmt` when the `defmt` feature is on (the image's UART logger), nothing
//! otherwise. The arguments are not evaluated without the feature.

/// Logs at info level.
macro_rules! info {
    ($($arg:tt)*) => {{
        #[cfg(feature = "defmt")]
        defmt::info!($($arg)*);
    }};
}

/// Logs at warn level.
macro_rules! warning {
    ($($arg:tt)*) => {{
        #[cfg(feature = "defmt")]
        defmt::warn!($($arg)*);
    }};
}

/// Logs at debug level.
macro_rules! debug {
    ($($arg:tt)*) => {{
        #[cfg(feature = "defmt")]
        defmt::debug!($($arg)*);
    }};
}

pub(crate) use {debug, info, warning};
