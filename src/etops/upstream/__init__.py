"""Extension: ``etops report upstream``, findings in the form ExecuTorch's maintainers
take them: each root-cause finding of ``etops check`` / ``etops dev`` a failing
``TEST_F`` of upstream's ``kernels/test/op_<name>_test.cpp``, verified (it fails on
the wheel's kernel for the finding's reason and passes on ATen's), with its issue text.

Owns: where findings come from and their smallest calls (source.py), what a test
states (spec.py), exact C++ literals (literals.py), the TEST_F text (cpp.py), where
an operator's kernel and test live in a checkout (locate.py), building and running
the tests (verify.py), the issue text (issue.py), the report, patch and --apply
(report.py), and the regression view of two versions' reports (versions.py).

May import: the core, etops.conformance (clusters, case, effective, precise,
values, reproducer, runner), etops.gtest, etops.custom (override) and
etops.checkout. Nothing imports it but the CLI.
"""
