"""The real side: tiny pipelines trained for real under the same controller and schedulers as
the simulator, one sub-stage at a time (built in ``jobs``, run in ``pipeline``, driven through
``real_runtime``; ``service_executor`` for the service, ``run`` for ``jigsaw run``)."""
