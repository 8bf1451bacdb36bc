//! Load ramps and throughput searches: pure logic over a "run a trial at rate
//! R for T" interface, testable with a simulated DUT. No I/O here.
