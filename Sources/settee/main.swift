print("settee")
