"""``up --local``: a dry run that boots a plan's nodes as local containers behind a provider's fake.

lab (the background process owning a network namespace, the fake and the nodes), nodes (the
systemd-nspawn machines), backed (the fakes whose instances are those machines). See
docs/lifecycle.md, "A local dry run".
"""
