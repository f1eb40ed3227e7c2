include $(sort $(wildcard $(BR2_EXTERNAL_PAYTERM_PATH)/package/*/*.mk))
