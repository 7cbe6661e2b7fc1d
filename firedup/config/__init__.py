"""What is deployed where: the inventory (hosts, groups), deployments and secrets.

Pure data, validated once at load; no I/O beyond reading the inventory file.
"""
