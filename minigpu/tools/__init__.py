"""Tools that import the engine and that nothing in the engine imports: the benchmark
(``bench``, ``suites``, ``timing``, ``references``), the static sm_90 kernel report
(``kernel_report``)."""
