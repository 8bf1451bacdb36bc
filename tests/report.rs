//! `linerate report`: HTML, comparison, exports.
