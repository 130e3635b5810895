print("agent")
