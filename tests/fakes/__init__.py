"""Fakes and helpers the tests share (no tests here): stand-ins passed into real code, the inputs
of golden-file tests, scripts the tests run in processes of their own. docs/testing.md lists them."""
