"""What a program does besides calling a model: `@tool` calls (recorded, answered under replay),
their errors, agents and workflows.
"""
