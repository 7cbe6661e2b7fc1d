"""Operations on one node or several, composed from the layers below: deploy, multi-node
deploy, stop, status, plan, smoke, history, explain-log, synced patches.
"""
