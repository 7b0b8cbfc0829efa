"""The Celery side of swarm: app factory, thin task adapters, signal listeners.

``celery -A workers worker`` finds the app in ``workers.celery`` (built from the
environment there, the worker's edge). Importing this package builds nothing.
"""
