"""The commands ``main.py``'s ``LAZY`` table loads when they run, one module per family
(record, time travel and the demo, the servers, sharing runs, suites, a service's requests):
``rewind-replay`` and ``rewind replay`` import none of them."""
